
from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.choices import ThreadStatus, value
from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, SinceOption, UntilOption, UtcOption, window
from nerve_cli.cli.group import HelpGroup
from nerve_cli.vocab import states

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Inspect workflow threads, answer the ones waiting for a person, cancel or run them again.\n\nExample: nerve thread list --status waiting && nerve thread approve run-7 --note \"ship it\"",
)


@app.command("list")
def list_(
    status: Annotated[Optional[ThreadStatus], typer.Option("--status", help="Only threads in this status; `waiting` is the inbox of waiting threads (the reason shows a person's question, or the event it waits for).", case_sensitive=False)] = None,
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="Only this workflow's threads.", autocompletion=complete.workflows)] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many threads (newest).")] = 50,
    since: SinceOption = None,
    until: UntilOption = None,
    home: HomeOption = None,
    json_: JsonOption = False,
    format_: FormatOption = None,
    _utc: UtcOption = False,
) -> None:
    """List threads, newest first (threads whose rows were archived included).

    --since/--until bound the time of each thread's last status change. A
    waiting thread shows its question, or the event it waits for, as the reason.

    Example: nerve thread list --status waiting
    """
    from nerve_cli.cli import output, thread_view
    from nerve_cli.contract.threads import thread_list
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.ops.workflows.threads import list_threads

    json_ = output.use_format(format_, json_) == "json"
    since_ms, until_ms = window(since, until)
    runs = list_threads(Layout(require_instance(home)).logs_db, status=value(status), workflow=workflow, limit=limit,
                        since_ms=since_ms, until_ms=until_ms)
    doc = thread_list(runs)
    if json_:
        output.print_json(doc)
    elif not runs:
        output.info("no threads" + (" match" if status or workflow or since or until else " yet"))
    else:
        output.show(thread_view.threads_table(doc["threads"]))


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Thread id, e.g. run-7 (or just 7).", autocompletion=complete.threads)],
    transcript: Annotated[bool, typer.Option("--transcript", help="Print the rounds as a conversation "
                                             "(role, time, content, meta folded) instead of a table.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
    format_: FormatOption = None,
    _utc: UtcOption = False,
) -> None:
    """Show one thread: header, then one row per round (the start message is not a round).

    Example: nerve thread show run-7 --transcript | less
    """
    from nerve_cli.cli import output, thread_view
    from nerve_cli.contract.threads import thread_show
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.ops.workflows.threads import thread_detail

    json_ = output.use_format(format_, json_) == "json"
    doc = thread_show(thread_detail(Layout(require_instance(home)).logs_db, run_id))
    if json_:
        output.print_json(doc)
        return
    if doc["damaged_rows"]:
        rows = ", ".join(str(i) for i in doc["damaged_rows"])
        output.warn(f"{doc['run_id']}: log row {rows} of logs.db is damaged (its payload is not a JSON object); "
                    "shown without it, and the thread cannot resume from its chain (`nerve doctor` checks logs.db)")
    if transcript:
        thread_view.transcript(doc)
        return
    thread_view.thread_header(doc)
    thread_view.thread_steps(doc)
    thread_view.thread_rounds(doc)


Note = Annotated[Optional[str], typer.Option("--note", help="Your answer's text: the moderator sees it as the "
                                             "next message (default: approved / rejected).")]
WaitingRun = Annotated[str, typer.Argument(help="A waiting thread, e.g. run-7 (or just 7).",
                                           autocompletion=complete.threads)]
Answer = Annotated[Optional[str], typer.Option("--answer", help="A structured answer, as JSON: checked against "
                                               "the JSON Schema the question declared (needed to approve such a "
                                               "question); the moderator reads it in the answer's meta[\"answer\"].")]


Question = Annotated[Optional[str], typer.Option("--question", "-q", help="The id of the one question to answer "
                                                  "(q1, q2, ...: `nerve thread show` lists them); default: every "
                                                  "open question of the thread.")]


@app.command("approve")
def approve(run_id: WaitingRun, note: Note = None, answer: Answer = None, question: Question = None,
            home: HomeOption = None, json_: JsonOption = False) -> None:
    """Approve a thread that waits for a person; it resumes with your answer as its next message.

    A round may ask several questions (one per tool call a model asked to run), each
    with its id: answer them one by one with --question ID, in any order, or all at
    once without it. The thread resumes once every question is settled: by a
    rejection, or by the approvals its workflow's `approvers:` ask for.

    The answer is a message from role `__person__` with meta {"decision": "approve",
    "approved": true, "note": ..., "answer": ...}. A question that declares a JSON
    Schema takes --answer JSON matching it (every mismatch is listed; nothing is
    written). Through the running engine the thread resumes at once (or queues behind
    running threads); with no engine it resumes at the next `nerve run`. See the
    waiting ones with `nerve thread list --status waiting`.

    Example: nerve thread approve run-7 --note "ship it, but fix the typo"

    Example: nerve thread approve run-8 --answer '{"env": "staging", "replicas": 2}'

    Example: nerve thread approve run-9 --question q2
    """
    _answer(run_id, "approve", note, answer, question, home, json_)


@app.command("reject")
def reject(run_id: WaitingRun, note: Note = None, answer: Answer = None, question: Question = None,
           home: HomeOption = None, json_: JsonOption = False) -> None:
    """Reject a thread that waits for a person; it resumes and its moderator decides what follows.

    Like approve, with meta {"decision": "reject", "approved": false, "note": ...}.
    A rejection settles its question at once, whatever `approvers:` ask.

    Example: nerve thread reject run-7 --note "too long; cut it to 3 bullets"

    Example: nerve thread reject run-9 --question q3 --note "not prod on a Friday"
    """
    _answer(run_id, "reject", note, answer, question, home, json_)


def _answer(run_id: str, decision: str, note: Optional[str], text: Optional[str], question: Optional[str],
            home: Optional[Path], json_: bool) -> None:
    from nerve_cli.automaton.model import NO_ANSWER
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import answer
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.gates import answer_thread
    from nerve_cli.store.events import parse_payload_text

    data = NO_ANSWER if text is None else parse_payload_text(text, "the answer")
    result = answer_thread(require_instance(home), run_id, decision, note, via=f"nerve thread {decision}", data=data,
                           question=question)
    if json_:
        output.print_json(answer(result))
        return
    done = ("approved" if decision == states.Decision.APPROVE else "rejected") + (
        f" ({', '.join(result['answered'])})" if result.get("answered") else "")
    if result.get("open"):
        output.info(f"{result['run_id']} {done}; it waits on for {', '.join(result['open'])} "
                    f"(`nerve thread show {result['run_id']}` lists them)", style="green")
    elif result["via"] == "offline":
        output.info(f"{result['run_id']} {done}; no engine is running: it resumes at the next `nerve run`",
                    style="green")
    elif result["status"] == states.ThreadStatus.STARTED:
        output.info(f"{result['run_id']} {done}; it resumes now (follow it with "
                    f"`nerve thread show {result['run_id']}`)", style="green")
    else:
        output.info(f"{result['run_id']} {done}; it resumes when a slot of its workflow is free", style="green")


@app.command("link")
def link(
    run_id: Annotated[Optional[str], typer.Argument(help="A thread waiting for a person, e.g. run-7 (or just 7).",
                                                    autocompletion=complete.threads)] = None,
    question: Question = None,
    expires: Annotated[str, typer.Option("--expires", help="How long the link answers: a duration, e.g. 30m, 1d.")] = "1d",
    for_: Annotated[Optional[str], typer.Option("--for", help="Whose answer the link records (default: you, git's "
                                                "user.name); their approval counts toward `approvers:`.")] = None,
    rotate_key: Annotated[bool, typer.Option("--rotate-key", help="Make a new link key first: every link made "
                                             "before stops working (401).")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Print a URL that answers a waiting thread once: signed, single use, expiring.

    The link opens a page on the engine's HTTP listener (`engine.webhooks`,
    loopback unless told otherwise) showing the question(s), the tool call or
    step, and a form; its answer is recorded `via` link, by the person it was
    made for. The same link again answers 409, a changed one 401, an expired
    one 410. The key lives in the instance's data/link.key.

    Example: nerve thread link run-7 --question q2 --expires 2h

    Example: nerve thread link --rotate-key
    """
    from nerve_cli.cli import output
    from nerve_cli.config.model import parse_duration
    from nerve_cli.contract.threads import thread_link
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.links import make_link
    from nerve_cli.store.links import rotate_key as new_key

    instance = require_instance(home)
    try:
        seconds = parse_duration(expires)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--expires") from None
    if rotate_key:
        new_key(instance)
        if run_id is None:
            output.info("a new link key: links made before no longer answer", style="green")
            return
    if run_id is None:
        raise typer.BadParameter("name the waiting thread (e.g. run-7), or give --rotate-key alone",
                                 param_hint="RUN_ID")
    made = make_link(instance, run_id, question, seconds, for_)
    if json_:
        output.print_json(thread_link(made))
        return
    output.info(made["url"])
    output.info(f"answers {made['run_id']} {', '.join(made['questions'])} as {made['by']}, once, until "
                f"{output.when(made['expires_at'] * 1000)}", style="dim")


@app.command("cancel")
def cancel(
    run_id: Annotated[str, typer.Argument(help="A queued, running or waiting thread, e.g. run-7 (or just 7).",
                                          autocompletion=complete.threads)],
    reason: Annotated[Optional[str], typer.Option("--reason", help="Why: kept as the thread's reason "
                                                  "(default: cancelled by nerve thread cancel).")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Cancel a thread: a queued or waiting one ends `cancelled` at once; a running one's role is cancelled.

    A running thread ends `cancelled` when its role stops, within the workflow's
    cancel_grace (default 5s; a role that does not stop has its worker stopped).
    With no engine running the thread is marked cancelled in logs.db. Cancelling
    an ended thread is an error naming its status (`nerve thread rerun` starts it again).

    Example: nerve thread cancel run-7 --reason "wrong repository"
    """
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import cancelled
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.control import cancel_thread

    result = cancel_thread(require_instance(home), run_id, reason, via="nerve thread cancel")
    if json_:
        output.print_json(cancelled(result))
    elif result["status"] == "cancelling":
        output.info(f"{result['run_id']} is being cancelled: its role was told to stop (follow it with "
                    f"`nerve thread show {result['run_id']}`)", style="yellow")
    else:
        where = "" if result["via"] == "engine" else " (no engine is running: written to the log)"
        output.info(f"{result['run_id']} cancelled (it was {result['was']}){where}", style="green")


@app.command("pause")
def pause(
    run_id: Annotated[str, typer.Argument(help="A queued, running or waiting thread, e.g. run-7 (or just 7).",
                                          autocompletion=complete.threads)],
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Pause a thread: no round of it starts, and it holds no slot, until `nerve thread resume`.

    A queued or waiting thread is paused at once; a running one once its running
    round has finished (`pausing` until then). It stays paused across engine
    restarts. An event its wait matches meanwhile is kept: it resumes the thread
    once the thread is resumed. With no engine running a queued or waiting
    thread is marked paused in logs.db.

    Example: nerve thread pause run-7 && nerve thread resume run-7
    """
    _pause_or_resume(run_id, home, json_, resume=False)


@app.command("resume")
def resume(
    run_id: Annotated[str, typer.Argument(help="A paused thread, e.g. run-7 (or just 7).",
                                          autocompletion=complete.threads)],
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Resume a paused thread: it goes on from its last round (queued for a slot), or waits again.

    A thread whose last message waits (a person, an event) waits again, its
    timeout counted from now; an event that matched while it was paused resumes
    it at once.

    Example: nerve thread resume run-7 --json
    """
    _pause_or_resume(run_id, home, json_, resume=True)


def _pause_or_resume(run_id: str, home: Path | None, json_: bool, *, resume: bool) -> None:
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import paused
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.control import pause_thread

    verb = "resume" if resume else "pause"
    result = pause_thread(require_instance(home), run_id, via=f"nerve thread {verb}", resume=resume)
    if json_:
        output.print_json(paused(result))
        return
    what = {"pausing": "its running round finishes first", "paused": "no round starts until `nerve thread "
            f"resume {result['run_id']}`", "started": "it runs now", "queued": "it starts when a slot is free",
            "waiting": "it waits again for what its last round asked"}.get(result["status"], "")
    where = "engine" if result["via"] == "engine" else "no engine is running: written to the log"
    output.show(output.table(None, ["thread", "status", "was", "", "via"],
                             [[result["run_id"], result["status"], result.get("was", "paused"), what, where]]))


@app.command("rerun")
def rerun(
    run_id: Annotated[str, typer.Argument(help="Any thread, e.g. run-7 (or just 7).", autocompletion=complete.threads)],
    from_round: Annotated[Optional[int], typer.Option("--from-round", min=0, help="Start from this thread's chain "
                                                      "up to round K (0: the prompt alone) instead of from its "
                                                      "prompt.")] = None,
    message: Annotated[Optional[str], typer.Option("--message", help="With --from-round: the content of the last "
                                                   "message kept (round K's, or the prompt for 0), edited.")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Run a thread again: a new thread with the same workflow, prompt and limits (its origin names the old one).

    With --from-round K the new thread starts from the old one's messages up to
    round K and goes on from there (its moderator decides what follows), the last
    message optionally edited with --message: try again from a point, with a
    different answer. Through the running engine it starts at once; with none it
    is queued for the next `nerve run`.

    Example: nerve thread rerun run-7

    Example: nerve thread rerun run-7 --from-round 3 --message "use the staging cluster"
    """
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import rerun as rerun_doc
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.control import rerun_thread

    result = rerun_thread(require_instance(home), run_id, from_round, message, via="nerve thread rerun")
    if json_:
        output.print_json(rerun_doc(result))
        return
    when = {"started": "it runs now", "queued": "it starts when a slot of its workflow is free"}.get(result["status"], "")
    if result["via"] == "offline":
        when = "no engine is running: it starts at the next `nerve run`"
    output.info(f"{result['run_id']} runs {result['rerun_of']} again; {when} "
                f"(follow it with `nerve thread show {result['run_id']}`)", style="green")
