"""Prompt-injection patterns as data (GoClaw's six families and more).

Each :class:`InjectionPattern` is a name, a severity and one case-insensitive regex that runs
on a *canonical* form of the text (lower case, NFKC, zero-width characters dropped, common
homoglyphs folded). Extend the set by passing your own tuple to :func:`scan_input`, e.g.
``(*DEFAULT_PATTERNS, InjectionPattern.of("my_rule", r"...", "high"))``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Severity = Literal["low", "medium", "high"]
SEVERITY_RANK: dict[str, int] = {"low": 1, "medium": 2, "high": 3}


@dataclass(frozen=True, slots=True)
class InjectionPattern:
    name: str
    regex: re.Pattern[str]
    severity: Severity = "high"

    @staticmethod
    def of(name: str, pattern: str, severity: Severity = "high") -> InjectionPattern:
        return InjectionPattern(name, re.compile(pattern, re.IGNORECASE | re.MULTILINE), severity)


# Up to ``n`` words between two anchors, never across sentence punctuation.
def _gap(n: int) -> str:
    return rf"(?:\s+[\w'’-]+){{0,{n}}}?\s+"


_OVERRIDE_VERBS = (r"(?:ignore|disregard|forget|skip|bypass|override|overlook|neglect|drop|"
                   r"abandon|discard|nevermind|never\s+mind|ditch|set\s+aside)")
_RULE_NOUNS = (r"(?:instructions?|prompts?|rules|directions|directives?|guidelines|guidance|"
               r"programming|training|constraints|restrictions|limitations|guardrails|"
               r"safety\s+(?:filters?|guidelines|training|checks|settings)|content\s+polic\w*|"
               r"system\s+(?:prompt|message)|developer\s+message|everything\s+(?:you\s+(?:were|"
               r"have\s+been|'ve\s+been)\s+told|above|before)|what\s+(?:the\s+system|your\s+"
               r"developers?|they|you\s+were)\s+(?:told|said|instructed))")
_NO_LIMITS = (r"(?:restrictions|guidelines|rules|filters|limits|limitations|"
              r"content\s+polic\w*|ethic\w*|moral\w*|censorship|safety\s+training)")
_AI = r"(?:ai|assistant|model|chatbot|bot|gpt|llm|agent)s?"
_DIRECTIVE = (r"(?:you|the|new|all|your|ignore|disregard|reveal|disclose|override|priority|"
              r"grant|obey|comply|always|never|disable|enable|from\s+now|assistant|ai|model|"
              r"answer|respond|print|output|tell|include|must|updated?|when|system)\b")
_TAG = (r"(?:<\|?(?:im_start|im_end|system|endoftext|end_header_id|eot_id)\|?>|<<\s*/?sys\s*>>|"
        r"\[/?inst\]|\[(?:system|sys|admin|developer|operator)\]|<system>|^\s*#{1,4}\s*system\s*:|"
        r"^\s*system\s*:|\bsystem\s+message\s*:)")

DEFAULT_PATTERNS: tuple[InjectionPattern, ...] = (
    # GoClaw's six.
    InjectionPattern.of("ignore_instructions",
                        rf"\b{_OVERRIDE_VERBS}\b(?!\s+my\b){_gap(6)}{_RULE_NOUNS}"),
    InjectionPattern.of("ignore_instructions",
                        r"\b(?:previous|prior|earlier|original|above|old|all)\s+(?:instructions|"
                        r"rules|guidelines|prompts?)\s+(?:are|is)\s+(?:no\s+longer|now)\s+"
                        r"(?:valid|void|in\s+effect|active|obsolete|cancell?ed|revoked)"),
    InjectionPattern.of("ignore_instructions",
                        r"\b(?:ignore|disregard|forget)\s+(?:the|this|your)\s+(?:[\w-]+\s+)?"
                        r"(?:task|request)\s+and\s+(?:instead|now)\b"),
    InjectionPattern.of("role_override",
                        r"\byou\s+are\s+(?:now\s+)?(?:no\s+longer\s+(?:a|an|the|bound|restricted|"
                        r"limited)|(?:a|an)\s+(?:different|new|unrestricted|unfiltered|"
                        r"uncensored)\s+(?:ai|assistant|model|chatbot|persona)|(?:now\s+)?in\s+"
                        r"(?:\w+\s+)?(?:jailbreak|developer|god|unrestricted|dan|admin|sudo)\s+"
                        r"mode|(?:now\s+)?(?:dan|stan|dude|aim|evilbot|bettergpt)\b)"),
    InjectionPattern.of("role_override",
                        r"\b(?:act|behave|respond|answer|role-?play|pretend|imagine|simulate)\b"
                        r"[^.?!\n]{0,60}?\b(?:unrestricted|unfiltered|uncensored|jailbroken|"
                        rf"(?:no|without(?:\s+any)?)\s+(?:\w+\s+)?{_NO_LIMITS}|not\s+bound\s+by|"
                        r"dan\b|evil\w*)"),
    InjectionPattern.of("role_override",
                        rf"\b{_AI}\b[^.?!\n]{{0,80}}?\b(?:has|have|with|without)\s+(?:no|any|"
                        rf"zero)?\s*(?:\w+\s+)?{_NO_LIMITS}"),
    InjectionPattern.of("role_override",
                        r"\b(?:do\s+anything\s+now|strive\s+to\s+avoid\s+norms|alter\s+ego|"
                        r"new\s+persona|jailbreak\s+(?:mode|successful)|freed\s+from\s+the|"
                        r"removed\s+(?:all|your|the)?\s*(?:safety|content)\s+\w+|"
                        r"(?:deceased|dead|late)\s+grand\w+\s+who\s+used\s+to)\b"),
    InjectionPattern.of("role_override",
                        r"\bdan\b[^.\n]{0,40}\b(?:ignores?|no\s+restrictions|anything|refuses?|"
                        r"polic\w+|filters?)"),
    InjectionPattern.of("role_override",
                        r"\b(?:(?:developer|dev|god|jailbreak|unrestricted|maintenance|dan)\s+mode"
                        r"\s+(?:enabled|activated|unlocked|on\b(?!\s+(?:my|your|the|a|an)\b))|(?:enter|activate|switch\s+to|"
                        r"turn\s+on|enable)\s+(?:the\s+)?(?:god|jailbreak|unrestricted|"
                        r"maintenance|dan|sudo)\s+mode)\b"),
    InjectionPattern.of("role_override",
                        r"\b(?:i\s+am|i'm|as)\s+(?:your|the)\s+(?:developer|creator|administrator|"
                        r"admin|operator|owner)\b[^\n]{0,80}?\b(?:disable|ignore|override|bypass|"
                        r"authori[sz]e|unlock|maintenance)"),
    InjectionPattern.of("role_override",
                        r"\b(?:disable|turn\s+off|deactivate|remove|lift)\s+(?:your|all|the|any)?"
                        r"\s*(?:safety|content)?\s*(?:filters?|restrictions|guardrails|"
                        r"limitations|censorship)"),
    InjectionPattern.of("system_tags", rf"{_TAG}\s*(?:(?:system|assistant|user)\b\s*)?"
                                       rf"(?:<<\s*sys\s*>>\s*)?{_DIRECTIVE}"),
    InjectionPattern.of("system_tags", r"\"role\"\s*:\s*\"system\"|\[system\]\(#\w+\)|"
                                       r"\bsystem\s+override\b"),
    InjectionPattern.of("instruction_injection",
                        r"\b(?:new|updated|revised|real|actual|additional|important(?:\s+new)?|"
                        r"secret|hidden)\s+(?:instructions?|task|rules|directives?|orders)\s*"
                        rf"(?:for\s+(?:the\s+|any\s+)?{_AI}\s*)?:"),
    InjectionPattern.of("instruction_injection", r"\boverride\s*:"),
    InjectionPattern.of("instruction_injection",
                        rf"\b(?:attention|note\s+to|message\s+to|instructions?\s+(?:to|for)|"
                        rf"dear|to\s+any|@)\s*(?:the\s+)?(?:ai\s+)?(?:language\s+)?{_AI}\b"),
    InjectionPattern.of("instruction_injection",
                        rf"\b{_AI}\s+(?:reading|processing|summari[sz]ing|who\s+reads?)\s+this"),
    InjectionPattern.of("instruction_injection",
                        rf"\b{_AI}\s*[:,]\s*(?:now\s+)?(?:ignore|disregard|forget|do\s+not|don't|"
                        r"instead|delete|send|forward|reveal|approve|rank|obey|follow|"
                        r"(?:when|if)\s+you\s+(?:read|see|process))\b"),
    InjectionPattern.of("instruction_injection",
                        r"\b(?:supersedes?|replaces?|overrides?|overrule)\s+(?:your|the)\s+"
                        r"(?:system\s+prompt|instructions|rules|guidelines|programming)"),
    InjectionPattern.of("null_bytes", r"\x00", "medium"),
    InjectionPattern.of("delimiter_escape",
                        r"\bend\s+of\s+(?:the\s+)?(?:system(?:\s+prompt|\s+message)?|context|"
                        r"instructions|user\s+input|prompt|document)\b\s*[.:=\-\]]"),
    InjectionPattern.of("delimiter_escape",
                        r"\b(?:begin|start)\s+(?:of\s+)?(?:user|admin|new|real)\s+(?:override|"
                        r"instructions|input|prompt|task)"),
    InjectionPattern.of("delimiter_escape",
                        r"</(?:instructions?|system|context|user_input|user|document|data|"
                        r"tool_result|untrusted_content|prompt|input|rules)>|\]\]>\s*</?\w+>"),
    # Beyond GoClaw: asking for the hidden prompt, and exfiltration through markdown images.
    InjectionPattern.of("prompt_leak",
                        r"\b(?:reveal|print|output|show|repeat|display|disclose|leak|dump|"
                        r"tell\s+me|give\s+me)\b(?:\s+[\w'’-]+){0,4}?\s+(?:your\s+(?:system\s+"
                        r"prompt|initial\s+prompt|prompt|instructions|rules|configuration|"
                        r"secrets?)|the\s+(?:system|initial|hidden|original|developer)\s+"
                        r"(?:prompt|message|instructions)|the\s+text\s+above|everything\s+"
                        r"(?:before|above))"),
    InjectionPattern.of("prompt_leak",
                        r"\bwhat\s+(?:were|are|is)\s+your\s+(?:original|initial|hidden|system)?"
                        r"\s*(?:instructions|prompt|system\s+prompt)"),
    InjectionPattern.of("prompt_leak",
                        r"\b(?:repeat|recite|reproduce|print|output|show|list|summari[sz]e|"
                        r"translate|spell\s+out|tell\s+me)\b(?:\s+[\w'’-]+){0,3}?\s+(?:the\s+|"
                        r"your\s+|all\s+(?:the\s+)?)?(?:instructions|rules|directions|guidelines|"
                        r"text|words|message)\s+(?:you\s+(?:were|have\s+been|got|received)\s+"
                        r"(?:given|told|sent)?|(?:given|written|placed|provided)\s+(?:to\s+you|"
                        r"above|before)|(?:at|from)\s+the\s+(?:very\s+)?(?:beginning|start|top)|"
                        r"above\s+this|before\s+this)"),
    InjectionPattern.of("prompt_leak",
                        r"\bwhat\s+(?:were\s+you|was\s+(?:written|said))\s+(?:told|"
                        r"instructed|given)?\s*(?:before|above|at\s+the\s+(?:beginning|start))"),
    InjectionPattern.of("exfiltration",
                        # The alt text holds no "[": with one, "![" repeated made every
                        # match attempt read to the end of the text (quadratic).
                        r"!\[[^\]\[]*\]\(https?://[^)\s]*\?[^)\s]*=|\bexfiltrat\w+", "medium"),
)
