"""Which command that cannot be taken back a step's text runs, read as a shell would read it.

A pipeline step whose `do` runs `git push` waits for a person whatever its own
`risk` says. A pattern over the raw text was easy to pass (`git -C repo push`,
`pu''sh`, `rm -f -r`, `DROP/**/TABLE`, `$G push`): so the text is split into
simple commands the way a shell splits it (quotes joined, `;`, `&&`,
`||`, `|` and new lines between commands, `$(...)` and backticks read as
commands of their own), each command's program is found past variable
assignments and wrappers (`sudo`, `env`, `timeout 5`...), its options are
skipped, and its words are compared with `IRREVERSIBLE` in lower case. SQL is
looked for in the whole text with its comments taken out, case-insensitive.

What cannot be read statically counts as irreversible too: a program that is
a variable or a substitution (`$G push`), `eval`, and a shell reading its
commands from a pipe (`base64 -d | sh`) or from a `-c` string that cannot be
read. A text that is not shell at all (a model's prompt with an apostrophe) is
read word by word, quotes dropped. Every step is linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

UNREADABLE = "a command that cannot be read statically (a variable or substitution as the program, eval, or a " \
             "shell reading a pipe)"
# (label, program, the words that must follow it in order among its positional words); "" for the program alone
IRREVERSIBLE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("git push", "git", ("push",)),
    ("a package publish", "npm", ("publish",)), ("a package publish", "npm", ("unpublish",)),
    ("a package publish", "yarn", ("publish",)), ("a package publish", "yarn", ("npm", "publish")),
    ("a package publish", "pnpm", ("publish",)), ("a package publish", "cargo", ("publish",)),
    ("a package publish", "poetry", ("publish",)), ("a package publish", "uv", ("publish",)),
    ("a package publish", "gem", ("push",)), ("a package publish", "twine", ("upload",)),
    ("docker push", "docker", ("push",)), ("docker push", "docker", ("image", "push")),
    ("docker push", "podman", ("push",)),
    ("gh release create", "gh", ("release", "create")), ("gh pr merge", "gh", ("pr", "merge")),
    ("gh repo delete", "gh", ("repo", "delete")), ("gh release delete", "gh", ("release", "delete")),
    ("terraform apply/destroy", "terraform", ("apply",)), ("terraform apply/destroy", "terraform", ("destroy",)),
    ("terraform apply/destroy", "tofu", ("apply",)), ("terraform apply/destroy", "tofu", ("destroy",)),
    ("kubectl delete", "kubectl", ("delete",)), ("helm uninstall", "helm", ("uninstall",)),
)
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish", "ash", "busybox"}
WRAPPERS = {"sudo", "doas", "env", "command", "exec", "nohup", "time", "nice", "ionice", "stdbuf", "xargs", "builtin",
            "timeout", "watch", "chroot", "setsid", "flock", "su"}
_WRAPPER_REACH = 6  # words after a wrapper tried as its program
_BY_TOOL: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
for _label, _tool, _sequence in IRREVERSIBLE:
    _BY_TOOL.setdefault(_tool, []).append((_label, _sequence))
_LOOKED_AT = set(_BY_TOOL) | SHELLS | {"rm", "find", "dd", "curl"}  # and mkfs*: the programs read past their name
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "\n"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_BLOCK_COMMENTS = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENTS = re.compile(r"--[^\n]*")
_SQL = tuple((label, re.compile(rx, re.IGNORECASE)) for label, rx in (
    ("DROP", r"\bdrop\s+(?:table|database|schema|view|index)\b"),
    ("TRUNCATE", r"\btruncate\s+(?:table|only)\b|\btruncate\s+[\w.]+\s*(?:;|$)"),
    ("DELETE FROM", r"\bdelete\s+from\b"),
))
_ALTER = re.compile(r"\balter\s+table\b", re.IGNORECASE)
_DROP = re.compile(r"\bdrop\b", re.IGNORECASE)
_ALTER_REACH = 200  # characters after ALTER TABLE in which a DROP counts
_MAX_DEPTH = 8  # `sh -c "sh -c '...'"`: nested shells read this deep, deeper is unreadable


@lru_cache(maxsize=1024)  # a file's aliases repeat one text in many steps
def irreversible_command(text: str) -> str | None:
    """The label of the first command in `text` that cannot be taken back (or cannot be read), or None."""
    sql = _sql(text)
    return sql if sql is not None else _shell(text, 0)


def _sql(text: str) -> str | None:
    """SQL with its comments out, quotes dropped. A `--` line comment is also a shell option's start
    (`rm --force; psql -c "DROP TABLE t"`): the text is read both with and without them."""
    plain = _BLOCK_COMMENTS.sub(" ", text.replace("'", " ").replace('"', " "))
    for candidate in (plain, _LINE_COMMENTS.sub(" ", plain)):
        found = next((label for label, pattern in _SQL if pattern.search(candidate)), None)
        if found is not None:
            return found
        for alter in _ALTER.finditer(candidate) if _DROP.search(candidate) else ():  # ALTER TABLE t DROP COLUMN c
            end = candidate.find(";", alter.end(), alter.end() + _ALTER_REACH)
            if _DROP.search(candidate, alter.end(), end if end >= 0 else alter.end() + _ALTER_REACH):
                return "ALTER TABLE ... DROP"
    return None


def _shell(text: str, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return UNREADABLE
    inner, outer = _substitutions(text)
    for part in inner:
        found = _shell(part, depth + 1)
        if found is not None:
            return found
    for words, piped_in in _commands(_words(outer)):
        found = _command(words, piped_in, depth)
        if found is not None:
            return found
    return None


_PIECES = re.compile(r"""'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[;&|()]+|\n|[ \t\r]+|[^\s'"\\;&|()]+|['"\\]""")


def _words(text: str) -> list[str]:
    """The text's words and operators as a shell splits them: quoted pieces joined to their word without their
    quotes, `#` at a word's start a comment. A quote that never closes (a prompt's apostrophe) is dropped."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    comment = False
    for match in _PIECES.finditer(text.replace("\\\n", " ")):
        piece = match.group()
        if comment:
            if piece != "\n":
                continue
            comment = False
        if piece[0] in " \t\r":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        elif piece == "\n" or piece[0] in ";&|()":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            words.append(piece)
        elif piece[0] == "#" and not in_word:
            comment = True
        else:
            if piece[0] == "'" and len(piece) > 1:
                piece = piece[1:-1]
            elif piece[0] == '"' and len(piece) > 1:
                piece = re.sub(r"\\(.)", r"\1", piece[1:-1])
            elif piece[0] == "\\":
                piece = piece[1:]
            elif piece in ("'", '"'):
                piece = ""
            current.append(piece)
            in_word = True
    if in_word:
        words.append("".join(current))
    return words


def _commands(words: Sequence[str]) -> Iterator[tuple[list[str], bool]]:
    """Simple commands and whether each reads a pipe."""
    current: list[str] = []
    piped = False
    for word in words:
        if word in SEPARATORS or set(word) <= set(";&|()") and word:
            if current:
                yield current, piped
            piped = word in ("|", "|&")
            current = []
        else:
            current.append(word)
    if current:
        yield current, piped


def _command(words: list[str], piped_in: bool, depth: int) -> str | None:
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return None
    program = words[0]
    if program.rsplit("/", 1)[-1] in WRAPPERS:
        # `sudo -u me git push`, `env -C dir FOO=1 rm -r x`: which word is the program depends on the wrapper's
        # options, so each of the next few words is tried as the program
        return next((found for j in range(1, min(len(words), _WRAPPER_REACH)) if not words[j].startswith("-")
                     and (found := _command(words[j:], piped_in, depth)) is not None), None)
    if "$" in program or "`" in program or program == "eval":
        return UNREADABLE
    name = program.rsplit("/", 1)[-1].lower()
    if name.startswith("mkfs"):
        return "mkfs"
    args = words[1:]
    if name not in _LOOKED_AT:
        return None
    lowered = [w.lower() for w in args]
    if name in SHELLS:
        script = _dash_c(args)
        if script is not None:
            return _shell(script, depth + 1)
        if piped_in or not [w for w in args if not w.startswith("-")]:
            return UNREADABLE  # its commands come from the pipe (or from whatever feeds its stdin)
        return None
    if name == "rm" and _recursive_rm(args):
        return "rm -r"
    if name == "find" and ("-delete" in lowered or _find_exec_rm(lowered)):
        return "find -delete"
    if name == "dd" and any(w.startswith("of=/dev/") for w in args):
        return "dd to a device"
    if name == "curl" and _curl_delete(args):
        return "curl -X DELETE"
    rules = _BY_TOOL.get(name)
    if rules:
        positional = [w for w in lowered if not w.startswith("-")]
        return next((label for label, sequence in rules if _in_order(sequence, positional)), None)
    return None


def _dash_c(args: list[str]) -> str | None:
    for i, word in enumerate(args):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:] and i + 1 < len(args):
            return args[i + 1]
    return None


def _recursive_rm(args: list[str]) -> bool:
    for word in args:
        if word == "--":
            return False
        if word == "--recursive" or (word.startswith("-") and not word.startswith("--") and set(word[1:]) & {"r", "R"}):
            return True
    return False


def _find_exec_rm(lowered: list[str]) -> bool:
    return any(w in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(lowered)
               and lowered[i + 1].rsplit("/", 1)[-1] in ("rm", "shred", "unlink") for i, w in enumerate(lowered))


def _curl_delete(args: list[str]) -> bool:
    for i, word in enumerate(args):
        if word in ("-X", "--request") and i + 1 < len(args) and args[i + 1].upper() == "DELETE":
            return True
        if word.upper() in ("-XDELETE", "--REQUEST=DELETE"):
            return True
    return False


def _in_order(sequence: tuple[str, ...], words: list[str]) -> bool:
    """Whether `sequence` appears in `words` in order (other words, option values among them, may lie between)."""
    it = iter(words)
    return all(any(w == wanted for w in it) for wanted in sequence)


_SUBSTITUTION = re.compile(r"\$\((?!\()|`")


def _substitutions(text: str) -> tuple[list[str], str]:
    """The commands inside `$(...)` and backticks, and the text with each replaced by `$SUB` (a word whose
    value is not known: as a program it cannot be read). One pass, parentheses counted."""
    inner: list[str] = []
    out: list[str] = []
    i, n = 0, len(text)
    while (found := _SUBSTITUTION.search(text, i)) is not None:
        out.append(text[i:found.start()])
        if found.group() == "`":
            end = text.find("`", found.end())
            end = n if end < 0 else end
            inner.append(text[found.end():end])
            i = end + 1
        else:
            depth, j = 1, found.end()
            while depth and (paren := _PARENS.search(text, j)) is not None:
                depth += 1 if paren.group() == "(" else -1
                j = paren.end()
            if depth:
                j = n + 1
            inner.append(text[found.end():j - 1])
            i = j
        out.append("$SUB")
    out.append(text[i:])
    return inner, "".join(out)


_PARENS = re.compile(r"[()]")
