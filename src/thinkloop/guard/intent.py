"""What a request asks for, by intent: action verbs mapped to the effects tools have.

Provenance gating asks "did the person ask for this action?". Words of a tool's name are not
an answer: "What are the key points in the file notes.txt?" names a file and notes but asks
for no write, and "tell me" sends nothing. Here a tool has *effects* (from the words of its
name, or ``Tool.meta["effects"]``), and a request asks for an effect only through an action
verb in the position of one (at the start of a clause, after "please", "and", "to", "by",
"can you", ...; not after "the", "my", "don't"). Some verbs need an object: "write" asks for
a file only when the request names one (a path, "file", "README"); "tell", "let", "ask",
"inform" send only to someone other than "me"; "send", "give" pay only when money is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Words of a tool's name and the effect each stands for.
TOOL_WORDS: Mapping[str, str] = {
    **dict.fromkeys(("write", "save", "create", "store", "append", "put", "export", "copy",
                     "mkdir", "touch", "new", "add", "insert"), "write"),
    **dict.fromkeys(("edit", "update", "modify", "patch", "replace", "rename", "move", "set",
                     "change"), "edit"),
    **dict.fromkeys(("delete", "remove", "rm", "erase", "purge", "unlink", "drop", "trash",
                     "wipe", "forget", "clear"), "delete"),
    **dict.fromkeys(("send", "email", "mail", "message", "messages", "post", "publish",
                     "notify", "reply", "forward", "sms", "tweet", "share", "invite", "chat",
                     "webhook", "upload", "comment", "respond", "dm"), "send"),
    **dict.fromkeys(("transfer", "pay", "payment", "wire", "refund", "donate", "purchase", "buy",
                     "order", "checkout", "money"), "pay"),
    **dict.fromkeys(("shell", "run", "exec", "execute", "command", "bash", "terminal", "script",
                     "workflow", "python", "eval", "process"), "run"),
    **dict.fromkeys(("schedule", "book", "calendar", "reserve", "meeting", "appointment"),
                    "schedule"),
    **dict.fromkeys(("fetch", "browse", "navigate", "http", "url", "download", "get"), "fetch"),
    **dict.fromkeys(("click", "type", "fill", "submit", "press"), "browse"),
}


def _forms(*stems: str) -> frozenset[str]:
    """A verb's forms: 'write:writes,writing,wrote,written' or a bare regular verb."""
    out: set[str] = set()
    for stem in stems:
        base, _, more = stem.partition(":")
        out.add(base)
        if more:
            out.update(more.split(","))
        else:
            root = base[:-1] if base.endswith("e") else base
            out.update({base + "s", base + "d" if base.endswith("e") else base + "ed",
                        root + "ing"})
    return frozenset(out)


WRITE = _forms("write:writes,writing,wrote,written", "put:puts,putting", "jot:jots,jotting,"
               "jotted", "note", "log:logs,logging,logged", "add", "make:makes,making,made",
               "create", "generate", "draft", "copy:copies,copying,copied", "insert",
               "keep:keeps,keeping,kept", "record", "output", "dump")
SAVE = _forms("save", "store", "export", "append", "overwrite:overwrites,overwriting,"
              "overwrote,overwritten", "persist")
EDIT = _forms("edit", "change", "fix:fixes,fixing,fixed", "modify:modifies,modifying,modified",
              "replace", "rename", "correct", "rewrite:rewrites,rewriting,rewrote,rewritten",
              "refactor", "patch:patches,patching,patched", "amend", "reword", "uncomment")
EDIT_OBJECT = _forms("update", "add", "insert", "append", "remove", "delete", "move",
                     "set:sets,setting", "sort", "format", "clean", "tidy:tidies,tidying,"
                     "tidied", "comment", "bump", "adjust", "improve", "translate", "convert",
                     "mark", "strip:strips,stripping,stripped", "trim:trims,trimming,trimmed",
                     "fill", "put:puts,putting", "change")
DELETE = _forms("delete", "remove", "erase", "purge", "wipe", "discard", "trash", "clear",
                "drop:drops,dropping,dropped", "rm", "unlink", "uninstall", "empty:empties,"
                "emptying,emptied", "forget:forgets,forgetting,forgot,forgotten", "cancel:cancels,"
                "cancelling,canceling,cancelled,canceled", "destroy", "shred")
SEND = _forms("send:sends,sending,sent", "email", "mail", "forward", "reply:replies,replying,"
              "replied", "respond", "message", "share", "post", "publish", "ping", "cc",
              "dm:dms,dming,dmed", "notify:notifies,notifying,notified", "invite", "upload",
              "announce", "broadcast:broadcasts,broadcasting", "tweet", "submit:submits,"
              "submitting,submitted")
# Send only with someone to send to: "tell ann", not "tell me"; "answer bob", not "answer
# the question".
TELL = _forms("tell:tells,telling,told", "let:lets,letting", "ask", "inform", "text", "remind",
              "warn", "alert", "thank", "call:calls,calling,called", "contact", "brief",
              "update", "answer", "confirm", "accept", "decline", "write:writes,writing,wrote,"
              "written", "report", "greet", "reach:reaches,reaching,reached")
PAY = _forms("pay:pays,paying,paid", "transfer:transfers,transferring,transferred", "wire",
             "refund", "donate", "settle", "reimburse", "tip:tips,tipping,tipped", "purchase",
             "buy:buys,buying,bought", "order")
MONEY = _forms("send:sends,sending,sent", "give:gives,giving,gave,given", "move", "cover",
               "split:splits,splitting", "put:puts,putting", "return", "top:tops,topping,"
               "topped", "load")
RUN = _forms("run:runs,running,ran", "rerun:reruns,rerunning,reran", "execute", "exec",
             "launch", "start", "install", "build:builds,building,built", "compile", "test",
             "invoke", "lint", "deploy", "restart", "migrate", "benchmark", "reproduce",
             "type-check", "typecheck", "format")
SCHEDULE = _forms("schedule", "book", "arrange", "reserve", "reschedule", "plan:plans,planning,"
                  "planned", "set:sets,setting", "add", "create", "move", "put:puts,putting",
                  "block", "organize", "organise", "invite")
FETCH = _forms("fetch", "open", "visit", "browse", "read:reads,reading", "get:gets,getting,got",
               "download", "look:looks,looking,looked", "check", "go:goes,going,went", "load",
               "see:sees,seeing,saw", "find:finds,finding,found", "search", "summarize",
               "summarise", "pull", "scrape", "crawl")
BROWSE = _forms("click", "type", "fill", "submit:submits,submitting,submitted", "press",
                "enter", "log:logs,logging,logged", "sign", "select", "choose:chooses,choosing,"
                "chose", "tick", "search", "book", "order", "buy:buys,buying,bought", "add")

_ME = frozenset({"me", "us", "myself", "ourselves", "i", "what", "how", "why", "whether", "if",
                 "when", "where", "which", "who", "it", "this", "that", "yourself", "about"})
_TO_SOMEONE = frozenset({"x", "to", "him", "her", "them", "back", "everyone", "everybody",
                         "sender", "team", "boss", "client", "customer", "customers", "manager",
                         "landlord", "mum", "mom", "dad", "colleague", "colleagues", "all"})
# Words after which the next word is in the position of a verb.
_BEFORE_VERB = frozenset({
    "and", "then", "please", "pls", "plz", "kindly", "also", "to", "you", "just", "now", "first",
    "next", "finally", "go", "can", "could", "would", "will", "should", "must", "lets", "let's",
    "i", "we", "me", "by", "after", "before", "or", "afterwards", "quickly", "immediately",
    "simply", "directly", "once", "later", "so", "help", "ok", "okay", "yes", "need", "want",
    "might", "shall", "do", "i'd", "i'll", "you'll", "we'll", "we'd", "gonna",
    # "have a worker run the tests", "get someone to ...": a helper does it for the person.
    "worker", "workers", "agent", "agents", "subagent", "sub-agent", "someone", "helper",
})
_NOT_OBJECT = frozenset({"of", "from", "about", "on", "regarding"})
_CLAUSE = re.compile(r"[.;:!?](?=\s|$)|[\n\"()\[\],]|\s-{1,2}\s|\bbut\b|\bwhile\b")
_TOKEN = re.compile(r"(?<![\w~./'@+-])[\w~./'@+-]*\w")
# A URL without the punctuation that ends its sentence; an e-mail address.
# Matches start only where a run of such characters starts: linear on any input.
_URLISH = re.compile(r"(?<![\w.+-])(?:\w++://\S*[^\s,;.!?)]|[\w.+-]++@[\w-]++(?:\.[\w-]++)*+)")
_OBJECT_WORDS = 12  # how far after a verb its object is looked for
_PATHLIKE = re.compile(r"\w\.[a-z0-9]{1,5}$|/")
_FILE_WORDS = frozenset({"file", "files", "document", "documents", "doc", "docs", "folder",
                         "directory", "disk", "readme", "changelog", "spreadsheet", "notebook",
                         "dockerfile", "makefile", "repo", "repository", "workspace"})
_CODE_WORDS = _FILE_WORDS | frozenset({
    "code", "function", "functions", "bug", "bugs", "test", "tests", "class", "method", "module",
    "script", "config", "configuration", "line", "lines", "import", "imports", "typo", "typos",
    "docstring", "version", "dependency", "dependencies", "comment", "comments", "header",
    "section", "entry", "entries", "row", "rows", "column", "todo", "setting", "print",
    "settings", "variable", "constant", "field", "key", "value", "readme", "changelog",
    "license", "statement", "docstrings", "type", "types", "annotation",
    "annotations", "log", "logging", "tab", "tabs", "spaces", "whitespace", "formatting"})
# File words that name a whole file: adding one is a write, removing one a delete.
_CODE_ONLY = _CODE_WORDS - {"file", "files", "folder", "directory", "disk", "workspace", "repo",
                            "repository", "spreadsheet", "notebook"}
_INTO = frozenset({"to", "in", "into", "inside", "at", "within", "from"})
_NEGATION = frozenset({"don't", "dont", "not", "never", "no", "without", "nothing", "anything"})
_MODALS = frozenset({"could", "would", "should", "can", "will", "might", "must", "shall", "to",
                     "do", "did"})
_QUESTION = frozenset({"how", "what", "where", "who", "when", "why", "which", "whether", "if"})
_MONEY = re.compile(r"[€$£¥]|\b(?:eur|euros?|usd|dollars?|pounds?|gbp|chf|francs?|yen|bucks|"
                    r"cents?|money|iban|cash)\b|\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,}",
                    re.IGNORECASE)
_DATE = re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:tomorrow|today|"
                   r"tonight|noon|calendar|meeting|appointment|call|slot|am|pm|week|month)\b|"
                   r"\d{1,2}[:.]\d{2}|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|"
                   r"jul|aug|sep|oct|nov|dec)", re.IGNORECASE)


def tool_effects(name: str, declared: Iterable[str] | None = None) -> frozenset[str]:
    """The effects of a tool: declared, or from the words of its name."""
    if declared:
        return frozenset(declared)
    words = re.findall(r"[a-z]+", name.lower().replace("e-mail", "email"))
    return frozenset(TOOL_WORDS[w] for w in words if w in TOOL_WORDS)


def _clauses(request: str) -> list[list[str]]:
    text = request.lower().replace("e-mail", "email").replace("’", "'")
    text = _URLISH.sub(" x ", text)
    return [_TOKEN.findall(part) for part in _CLAUSE.split(text)]


def _is_file(word: str) -> bool:
    return word in _FILE_WORDS or bool(_PATHLIKE.search(word))


def _file_after(rest: list[str], words: frozenset[str] = _FILE_WORDS) -> bool:
    """A file (or, with ``words``, code) named after the verb, not as "of"/"from" a file."""
    for i, word in enumerate(rest):
        if (word in words or bool(_PATHLIKE.search(word))) and \
                (i == 0 or rest[i - 1] not in _NOT_OBJECT):
            return True
    return False


def _inside(rest: list[str]) -> bool:
    """Content of a file ("the imports in utils.py", "a line to notes.md"), or code."""
    return any(w in _CODE_ONLY for w in rest) or any(
        _is_file(w) and i and rest[i - 1] in _INTO for i, w in enumerate(rest))


def _verb_effects(verb: str, rest: list[str], money: bool, date: bool) -> set[str]:
    after = rest[0] if rest else None
    found: set[str] = set()
    if verb in SAVE or (verb in WRITE and _file_after(rest)):
        found.add("write")
    if verb in EDIT or (verb in EDIT_OBJECT and _inside(rest)):
        found.add("edit")
    if verb in DELETE and not (verb in EDIT_OBJECT | _CLEAN and _inside(rest)):
        found.add("delete")  # "delete old.tmp", not "remove the print from main.py"
    if verb in DELETE and verb in _CLEAN and _inside(rest):
        found.add("edit")
    if verb in SEND or (verb in TELL and after is not None and (
            after in _TO_SOMEONE or (after not in _ME and verb not in _AMBIGUOUS))):
        found.add("send")
    if verb in PAY or (verb in MONEY and money):
        found.add("pay")
    if verb in RUN:
        found.add("run")
    if verb in SCHEDULE and (verb not in _SCHEDULE_WEAK or date):
        found.add("schedule")
    if verb in FETCH:
        found.add("fetch")
    if verb in BROWSE:
        found.add("browse")
    return found


# Ordinary words that send only to someone named by an address or a role ("answer bob@x").
_AMBIGUOUS = _forms("answer", "confirm", "accept", "decline", "write:writes,writing,wrote,"
                    "written", "report", "update", "call:calls,calling,called", "reach:reaches,"
                    "reaching,reached", "text")
_CLEAN = _forms("clean", "clear", "strip:strips,stripping,stripped", "drop:drops,dropping,"
                "dropped", "remove", "delete", "erase", "purge", "wipe")
_SCHEDULE_WEAK = _forms("set:sets,setting", "add", "create", "move", "put:puts,putting",
                        "block", "plan:plans,planning,planned", "organize", "organise", "invite")


def _is_verb(words: list[str], i: int, negated: bool) -> bool:
    """Is ``words[i]`` an action the person asks for: in the position of a verb, not negated
    ("don't send it": ``negated``, a negation earlier in the clause), not the person's own
    ("a reply I could send", "if I ran"), not a question about how ("how do I delete", "tell
    me how to run")?"""
    if negated or (i and words[i - 1] not in _BEFORE_VERB):
        return False
    prev, prev2 = (words[i - 1] if i else None), (words[i - 2] if i > 1 else None)
    question = words[0] in _QUESTION
    if prev in ("i", "we") and (question or i > 1):
        return False
    if prev in _MODALS and prev2 in ("i", "we"):
        return False
    if prev == "to" and prev2 in _QUESTION:
        return False
    return not (question and i >= 2 and words[1] in _MODALS)


_VERBS = WRITE | SAVE | EDIT | EDIT_OBJECT | DELETE | SEND | TELL | PAY | MONEY | RUN | \
    SCHEDULE | FETCH | BROWSE


def asked_effects(request: str) -> frozenset[str]:
    """The effects an action verb of ``request`` asks for."""
    found: set[str] = set()
    money, date = bool(_MONEY.search(request)), bool(_DATE.search(request))
    for words in _clauses(request):
        negated = False
        for i, word in enumerate(words):
            if word == "drop" and words[i + 1: i + 3] == ["a", "line"]:
                found.add("send")
            elif word in _VERBS and _is_verb(words, i, negated):
                rest = words[i + 1: i + 1 + _OBJECT_WORDS]
                found |= _verb_effects(word, rest, money, date)
            negated = negated or word in _NEGATION
    return frozenset(found)


def asked_for(tool: str, request: str, declared: Iterable[str] | None = None) -> bool:
    """Does ``request`` ask for what ``tool`` does? A tool of no known effect is asked for by
    a word of its name in the position of a verb."""
    effects = tool_effects(tool, declared)
    if effects:
        return bool(effects & asked_effects(request))
    names = set(re.findall(r"[a-z]+", tool.lower()))
    return any(i == 0 or words[i - 1] in _BEFORE_VERB
               for words in _clauses(request) for i, w in enumerate(words) if w in names)
