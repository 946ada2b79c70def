"""Notifications: `notify:` rules tell people through apprise what nerve-threads and nerve-health signal.

notices (what a signal means to a person: pure), outbox (data/notify.db: the
cursors and what is still to send, one row per notice and target), notifier
(the part: reads the two senses' signals after its cursors, fills the outbox,
sends off the kernel's loop with back-off, counts what failed).
"""
