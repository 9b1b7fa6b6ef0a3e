"""Realistic raw model outputs, one per format variant, with what the parser must read.

Each case: (id, raw reply, expected calls as (name, arguments), expected content, expected
thoughts). Written from each format's public description (Hermes/Qwen, Llama 3, Mistral,
CortexPrism's five, UrchinLoop, OrcBot, DeepSeek/GLM quirks).
"""

from __future__ import annotations

from typing import Any

Case = tuple[str, str, list[tuple[str, dict[str, Any]]], str, list[str]]

W = {"city": "Paris"}

HERMES: list[Case] = [
    ("hermes-single", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     "</tool_call>", [("get_weather", W)], "", []),
    ("hermes-prose-before", "I'll check the weather for you.\n\n<tool_call>\n"
     '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     [("get_weather", W)], "I'll check the weather for you.", []),
    ("hermes-two-in-a-row", '<tool_call>\n{"name": "get_weather", "arguments": {"city": '
     '"Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": '
     '"Lyon"}}\n</tool_call>', [("get_weather", W), ("get_weather", {"city": "Lyon"})], "", []),
    ("hermes-args-key", '<tool_call>{"name": "read_file", "args": {"path": "src/app.py"}}'
     "</tool_call>", [("read_file", {"path": "src/app.py"})], "", []),
    ("hermes-parameters-key", '<tool_call>{"name": "read_file", "parameters": {"path": '
     '"README.md"}}</tool_call>', [("read_file", {"path": "README.md"})], "", []),
    ("hermes-arguments-as-string", '<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 2, '
     '\\"b\\": 3}"}\n</tool_call>', [("add", {"a": 2, "b": 3})], "", []),
    ("hermes-nested-args", '<tool_call>{"name": "create_event", "arguments": {"title": '
     '"Standup", "when": {"day": "mon", "time": {"h": 9, "m": 30}}, "tags": ["a", "b"]}}'
     "</tool_call>", [("create_event", {"title": "Standup", "when": {"day": "mon", "time":
                                        {"h": 9, "m": 30}}, "tags": ["a", "b"]})], "", []),
    ("hermes-braces-in-string", '<tool_call>{"name": "write_file", "arguments": {"path": '
     '"a.js", "content": "function f() { return {x: 1}; }"}}</tool_call>',
     [("write_file", {"path": "a.js", "content": "function f() { return {x: 1}; }"})], "", []),
    ("hermes-closing-tag-in-string", '<tool_call>{"name": "echo", "arguments": {"text": '
     '"</tool_call> is the end tag"}}</tool_call>',
     [("echo", {"text": "</tool_call> is the end tag"})], "", []),
    ("hermes-no-arguments", '<tool_call>{"name": "get_time"}</tool_call>', [("get_time", {})],
     "", []),
    ("hermes-prose-after", '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\n'
     "Waiting for the result.", [("get_time", {})], "Waiting for the result.", []),
    ("hermes-missing-close-tag", 'Checking.\n<tool_call>\n{"name": "get_weather", '
     '"arguments": {"city": "Paris"}}', [("get_weather", W)], "Checking.", []),
    ("hermes-array-body", '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", '
     '"arguments": {"x": 1}}]</tool_call>', [("a", {}), ("b", {"x": 1})], "", []),
    ("qwen-with-think", "<think>\nThe user wants Paris weather. I should call the tool."
     '\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     "</tool_call>", [("get_weather", W)], "",
     ["The user wants Paris weather. I should call the tool."]),
    ("qwen3-coder-function-params", "<tool_call>\n<function=read_file>\n<parameter=path>\n"
     "src/main.py\n</parameter>\n</function>\n</tool_call>",
     [("read_file", {"path": "src/main.py"})], "", []),
    ("qwen3-coder-multiline-param", "<tool_call>\n<function=write_file>\n<parameter=path>\n"
     "a.py\n</parameter>\n<parameter=content>\ndef f():\n    return 1\n</parameter>\n"
     "</function>\n</tool_call>",
     [("write_file", {"path": "a.py", "content": "def f():\n    return 1"})], "", []),
    ("function-call-tag", '<function_call>{"name": "search", "arguments": {"q": "llama"}}'
     "</function_call>", [("search", {"q": "llama"})], "", []),
    ("minimax-tool-call", '<minimax:tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n'
     "</minimax:tool_call>", [("search", {"q": "x"})], "", []),
    ("openai-shape-in-tag", '<tool_call>{"type": "function", "function": {"name": "search", '
     '"arguments": "{\\"q\\": \\"cats\\"}"}}</tool_call>', [("search", {"q": "cats"})], "", []),
]

REPAIR: list[Case] = [
    ("repair-raw-newline", '<tool_call>{"name": "write_file", "arguments": {"path": "n.txt", '
     '"content": "line one\nline two"}}</tool_call>',
     [("write_file", {"path": "n.txt", "content": "line one\nline two"})], "", []),
    ("repair-unquoted-keys", "<tool_call>{name: \"read_file\", arguments: {path: \"a.txt\"}}"
     "</tool_call>", [("read_file", {"path": "a.txt"})], "", []),
    ("repair-single-quotes", "<tool_call>{'name': 'read_file', 'arguments': {'path': "
     "'it\\'s.txt'}}</tool_call>", [("read_file", {"path": "it's.txt"})], "", []),
    ("repair-trailing-commas", '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2,},}'
     "</tool_call>", [("add", {"a": 1, "b": 2})], "", []),
    ("repair-python-literals", '<tool_call>{"name": "set_flag", "arguments": {"on": True, '
     '"note": None, "off": False}}</tool_call>',
     [("set_flag", {"on": True, "note": None, "off": False})], "", []),
    ("repair-missing-final-brace", '<tool_call>{"name": "get_weather", "arguments": '
     '{"city": "Paris"}</tool_call>', [("get_weather", W)], "", []),
    ("repair-missing-braces-at-end", 'Sure.\n{"name": "get_weather", "arguments": {"city": '
     '"Paris"', [("get_weather", W)], "Sure.", []),
    ("repair-deepseek-mix", "<tool_call>{name: 'search', arguments: {query: 'rust async', "
     "limit: 5,}}</tool_call>", [("search", {"query": "rust async", "limit": 5})], "", []),
    ("repair-string-args-broken", '<tool_call>{"name": "add", "arguments": "{a: 1, b: 2}"}'
     "</tool_call>", [("add", {"a": 1, "b": 2})], "", []),
    ("repair-tab-in-string", '{"name": "write_file", "arguments": {"path": "t", "content": '
     '"a\tb"}}', [("write_file", {"path": "t", "content": "a\tb"})], "", []),
]

CORTEX: list[Case] = [
    ("cortex-nested-xml", "<tool_call_name>read_file</tool_call_name>\n<tool_call_args>"
     '{"path": "notes.md"}</tool_call_args>', [("read_file", {"path": "notes.md"})], "", []),
    ("cortex-nested-xml-wrapped", "<tool_call>\n<tool_call_name>list_dir</tool_call_name>\n"
     '<tool_call_args>{"path": "."}</tool_call_args>\n</tool_call>',
     [("list_dir", {"path": "."})], "", []),
    ("cortex-nested-xml-no-args", "Let me look.\n<tool_call_name>get_time</tool_call_name>",
     [("get_time", {})], "Let me look.", []),
    ("cortex-attribute", '<tool_call_name="read_file" path="src/a.ts"></tool_call_name>',
     [("read_file", {"path": "src/a.ts"})], "", []),
    ("cortex-attribute-selfclosing", '<tool_call_name="grep" pattern="TODO" path="src" />',
     [("grep", {"pattern": "TODO", "path": "src"})], "", []),
    ("cortex-tool-call-name-attr", '<tool_call name="search" query="deno kv"/>',
     [("search", {"query": "deno kv"})], "", []),
    ("cortex-name-as-tag", "<file_read_enhanced><path>src/index.ts</path></file_read_enhanced>",
     [("file_read_enhanced", {"path": "src/index.ts"})], "", []),
    ("cortex-name-as-tag-two-params", "I'll search.\n<grep_search>\n  <pattern>fn main</pattern>"
     "\n  <path>src</path>\n</grep_search>", [("grep_search", {"pattern": "fn main",
                                                               "path": "src"})],
     "I'll search.", []),
    ("cortex-parameter-tags", '<tool_call name="write_file">\n<parameter name="path" '
     'string="true">out.txt</parameter>\n<parameter name="content" string="true">hello'
     "</parameter>\n</tool_call>", [("write_file", {"path": "out.txt", "content": "hello"})],
     "", []),
    ("claude-style-invoke", "<function_calls>\n<invoke name=\"search\">\n<parameter name="
     "\"query\">weather Paris</parameter>\n</invoke>\n</function_calls>",
     [("search", {"query": "weather Paris"})], "", []),
    ("claude-style-two-invokes", "<function_calls>\n<invoke name=\"a\">\n<parameter name=\"x\">"
     "1</parameter>\n</invoke>\n<invoke name=\"b\">\n</invoke>\n</function_calls>",
     [("a", {"x": "1"}), ("b", {})], "", []),
    ("glm-arg-key-value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
     "</arg_value>\n</tool_call>", [("get_weather", W)], "", []),
    ("html-is-not-a-call", "Use <b>bold</b> and <ul><li>lists</li></ul> freely.", [],
     "Use <b>bold</b> and <ul><li>lists</li></ul> freely.", []),
]

LLAMA: list[Case] = [
    ("llama31-function-tag", '<function=get_weather>{"city": "Paris"}</function>',
     [("get_weather", W)], "", []),
    ("llama31-function-tag-prose", 'Let me check.<function=spotify_trending_songs>{"n": 5}'
     "</function>", [("spotify_trending_songs", {"n": 5})], "Let me check.", []),
    ("llama31-function-no-close", '<function=get_weather>{"city": "Paris"}',
     [("get_weather", W)], "", []),
    ("llama3-python-tag-json", '<|python_tag|>{"name": "get_weather", "parameters": '
     '{"city": "Paris"}}<|eom_id|>', [("get_weather", W)], "", []),
    ("llama3-python-tag-builtin", '<|python_tag|>brave_search.call(query="current weather in '
     'Menlo Park, California")<|eom_id|>', [("brave_search", {"query": "current weather in "
                                                              "Menlo Park, California"})],
     "", []),
    ("llama3-python-tag-two-json", '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; '
     '{"name": "b", "parameters": {"y": 2}}<|eot_id|>', [("a", {"x": 1}), ("b", {"y": 2})],
     "", []),
    ("llama3-bare-json", '{"name": "get_weather", "parameters": {"city": "Paris"}}',
     [("get_weather", W)], "", []),
    ("llama3-bare-json-prose", 'To answer, I will use the tool.\n{"name": "get_weather", '
     '"parameters": {"city": "Paris"}}', [("get_weather", W)],
     "To answer, I will use the tool.", []),
    ("bare-json-array", '[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "get_weather", "arguments": {"city": "Rome"}}]',
     [("get_weather", W), ("get_weather", {"city": "Rome"})], "", []),
    ("llama32-pythonic", '[get_weather(city="Paris"), get_time(tz="Europe/Paris")]',
     [("get_weather", W), ("get_time", {"tz": "Europe/Paris"})], "", []),
    ("llama32-pythonic-literals", "[search(q='x', limit=3, exact=True, lang=None)]",
     [("search", {"q": "x", "limit": 3, "exact": True, "lang": None})], "", []),
    ("llama4-pythonic-prose", 'I will look both up.\n[get_weather(city="Paris"), f(a=1)]',
     [("get_weather", W), ("f", {"a": 1})], "I will look both up.", []),
    ("pythonic-nested-values", '[plot(points=[[1, 2], [3, 4]], style={"color": "red"})]',
     [("plot", {"points": [[1, 2], [3, 4]], "style": {"color": "red"}})], "", []),
    ("bare-json-openai-shape", '{"type": "function", "function": {"name": "search", '
     '"arguments": {"q": "x"}}}', [("search", {"q": "x"})], "", []),
    ("bare-json-tool-calls-wrapper", '{"tool_calls": [{"name": "a", "arguments": {}}]}',
     [("a", {})], "", []),
]

MISTRAL: list[Case] = [
    ("mistral-array", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
     [("get_weather", W)], "", []),
    ("mistral-two", '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", '
     '"arguments": {"y": "z"}}]', [("a", {"x": 1}), ("b", {"y": "z"})], "", []),
    ("mistral-v11-named", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
     [("get_weather", W)], "", []),
    ("mistral-v11-two", '[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}',
     [("a", {"x": 1}), ("b", {})], "", []),
    ("mistral-call-id", '[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Paris"}',
     [("get_weather", W)], "", []),
    ("mistral-prose-before", 'Sure!\n[TOOL_CALLS][{"name": "get_time", "arguments": {}}]',
     [("get_time", {})], "Sure!", []),
]

FENCES: list[Case] = [
    ("fence-json", 'Calling:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
     "\n```", [("get_weather", W)], "Calling:", []),
    ("fence-tool-call", '```tool_call\n{"name": "read_file", "arguments": {"path": "a"}}\n```',
     [("read_file", {"path": "a"})], "", []),
    ("fence-tool-code", '```tool_code\nget_weather(city="Paris")\n```', [("get_weather", W)],
     "", []),
    ("fence-plain-json-array", '```\n[{"name": "a", "arguments": {}}]\n```', [("a", {})], "",
     []),
    ("fence-json-data-is-content", 'Here is the config:\n```json\n{"port": 8080}\n```',
     [], 'Here is the config:\n```json\n{"port": 8080}\n```', []),
    ("fence-json-name-data-is-content", '```json\n{"name": "Paris", "population": 2102650}\n```',
     [], '```json\n{"name": "Paris", "population": 2102650}\n```', []),
    ("fence-python-code-is-content", "Example:\n```python\ncall = {\"name\": \"x\", "
     "\"arguments\": {}}\n```", [], "Example:\n```python\ncall = {\"name\": \"x\", "
     "\"arguments\": {}}\n```", []),
    ("fence-json-decision", '```json\n{"reasoning": "search first", "tools": [{"name": '
     '"search", "arguments": {"q": "x"}}], "completed": false}\n```', [("search", {"q": "x"})],
     "", ["search first"]),
]

URCHIN: list[Case] = [
    ("urchin-plain-param", "<<TOOL:WEB_SEARCH:Solana token price>>",
     [("WEB_SEARCH", {"_param": "Solana token price"})], "", []),
    ("urchin-no-param", "<<TOOL:REMEMBER>>", [("REMEMBER", {})], "", []),
    ("urchin-json-param", '<<TOOL:REMEMBER:{"key": "wallet", "value": "7xKX"}>>',
     [("REMEMBER", {"key": "wallet", "value": "7xKX"})], "", []),
    ("urchin-think-then-tool", "<<THINK>>\nThe user wants to compare three tokens. I should:\n"
     "1. Use MULTI_SCAN\n<</THINK>>\n<<TOOL:MULTI_SCAN:a,b,c>>",
     [("MULTI_SCAN", {"_param": "a,b,c"})], "",
     ["The user wants to compare three tokens. I should:\n1. Use MULTI_SCAN"]),
    ("urchin-two-tools", "Scanning now.\n<<TOOL:SCAN_TOKEN:7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZ"
     "RuJosgAsU>>\n<<TOOL:WEB_SEARCH:Solana token price>>",
     [("SCAN_TOKEN", {"_param": "7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU"}),
      ("WEB_SEARCH", {"_param": "Solana token price"})], "Scanning now.", []),
    ("urchin-json-with-angle", '<<TOOL:ECHO:{"text": "a >> b"}>>',
     [("ECHO", {"text": "a >> b"})], "", []),
    ("urchin-multiline-param", "<<TOOL:NOTE:first line\nsecond line>>",
     [("NOTE", {"_param": "first line\nsecond line"})], "", []),
    ("urchin-lowercase-name", '<<TOOL:read_file:{"path": "a.txt"}>>',
     [("read_file", {"path": "a.txt"})], "", []),
    ("urchin-answer-after-think", "<<THINK>>I have the price.<</THINK>>\nSOL is $142.",
     [], "SOL is $142.", ["I have the price."]),
]

ORCBOT: list[Case] = [
    ("orcbot-step", '{\n"reasoning": "I need to search for the current weather in Paris.",\n'
     '"tools": [\n{\n"name": "web_search",\n"metadata": {\n"query": "weather Paris current '
     'temperature"\n}\n}\n],\n"completed": false\n}',
     [("web_search", {"query": "weather Paris current temperature"})], "",
     ["I need to search for the current weather in Paris."]),
    ("orcbot-arguments-key", '{"reasoning": "send it", "tools": [{"name": "send_telegram", '
     '"arguments": {"chatId": "123456789", "message": "8C"}}], "completed": false}',
     [("send_telegram", {"chatId": "123456789", "message": "8C"})], "", ["send it"]),
    ("orcbot-two-tools", '{"reasoning": "both", "tools": [{"name": "a", "arguments": {}}, '
     '{"name": "b", "arguments": {"x": 1}}], "completed": false}', [("a", {}), ("b", {"x": 1})],
     "", ["both"]),
    ("orcbot-done", '{"reasoning": "Task is complete.", "tools": [], "completed": true, '
     '"answer": "It is 8C in Paris."}', [], "", ["Task is complete."]),
    ("orcbot-repaired", "{reasoning: 'look it up', tools: [{name: 'search', arguments: "
     "{q: 'x',},},], completed: False,}", [("search", {"q": "x"})], "", ["look it up"]),
    ("orcbot-with-prose", 'Here is my decision:\n{"reasoning": "r", "tools": [{"name": "a", '
     '"arguments": {}}], "completed": false}', [("a", {})], "Here is my decision:", ["r"]),
]

THINKING: list[Case] = [
    ("think-then-answer", "<think>2+2 is 4.</think>\nThe answer is 4.", [],
     "The answer is 4.", ["2+2 is 4."]),
    ("thinking-tag", "<thinking>\nCheck units first.\n</thinking>\nIt is 3 km.", [],
     "It is 3 km.", ["Check units first."]),
    ("thought-tag", "<thought>short</thought>Done.", [], "Done.", ["short"]),
    ("deepseek-r1-no-opener", "The user asks for 2+2. That is 4.\n</think>\n\n4", [], "4",
     ["The user asks for 2+2. That is 4."]),
    ("think-contains-fake-call", '<think>Maybe <tool_call>{"name": "x", "arguments": {}}'
     "</tool_call>? No.</think>No tool needed.", [], "No tool needed.",
     ['Maybe <tool_call>{"name": "x", "arguments": {}}</tool_call>? No.']),
    ("think-unterminated", "<think>I was cut off while", [], "", ["I was cut off while"]),
    ("two-think-blocks", "<think>a</think>x<think>b</think>y", [], "xy", ["a", "b"]),
    ("think-and-tags-mixed", "<<THINK>>plan<</THINK>><think>more</think>Answer.", [],
     "Answer.", ["plan", "more"]),
    ("think-uppercase", "<THINK>loud</THINK>quiet", [], "quiet", ["loud"]),
]

PROSE: list[Case] = [
    ("plain-answer", "Paris is the capital of France.", [], "Paris is the capital of France.",
     []),
    ("braces-in-prose", "Use {name} as a placeholder and {x: 1} as a set.", [],
     "Use {name} as a placeholder and {x: 1} as a set.", []),
    ("json-answer-data", '{"name": "Alice", "age": 30}', [], '{"name": "Alice", "age": 30}', []),
    ("markdown-links", "See [the docs](https://x.y) and [1].", [],
     "See [the docs](https://x.y) and [1].", []),
    ("math-set", "f(x) = {x | x > 0} and [a, b]", [], "f(x) = {x | x > 0} and [a, b]", []),
    ("list-of-numbers", "[1, 2, 3] sums to 6.", [], "[1, 2, 3] sums to 6.", []),
    ("apostrophes", "It's {Bob's} turn, isn't it?", [], "It's {Bob's} turn, isn't it?", []),
    ("code-fence-js", "```js\nconst o = {name: 'x', arguments: {}};\n```", [],
     "```js\nconst o = {name: 'x', arguments: {}};\n```", []),
    ("empty", "", [], "", []),
    ("prose-name-placeholder", "Fill in {name: your name, age: your age} on the form.", [],
     "Fill in {name: your name, age: your age} on the form.", []),
    ("pythonic-positional-is-prose", "[print(x)] is not a call.", [],
     "[print(x)] is not a call.", []),
]

MIXED: list[Case] = [
    ("mixed-xml-and-bare", '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
     '{"name": "b", "arguments": {"k": 1}}', [("a", {}), ("b", {"k": 1})], "", []),
    ("mixed-think-xml-prose", "<think>need two</think>First:\n<tool_call>{\"name\": \"a\", "
     "\"arguments\": {}}</tool_call>\nthen:\n<function=b>{\"v\": 2}</function>",
     [("a", {}), ("b", {"v": 2})], "First:\n\nthen:", ["need two"]),
    ("mixed-urchin-and-xml", '<<TOOL:A:x>>\n<tool_call>{"name": "B", "arguments": {}}'
     "</tool_call>", [("A", {"_param": "x"}), ("B", {})], "", []),
    ("wrapped-in-answer-text", "Okay <tool_call>{\"name\": \"a\", \"arguments\": {}}"
     "</tool_call> done", [("a", {})], "Okay  done", []),
]

ALL: list[Case] = (HERMES + REPAIR + CORTEX + LLAMA + MISTRAL + FENCES + URCHIN + ORCBOT
                   + THINKING + PROSE + MIXED)
