"""The fleet: this host joined to others through NATS JetStream (link, outbox, inbox, service).

Imported only by an engine whose nerve.yaml has an enabled `fleet:` section:
these modules import `nats`, which no other part of the kernel loads.
"""
