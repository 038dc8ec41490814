#!/usr/bin/env python3
"""jinja_render.py - the chat-template oracle: renders a template with Python jinja2 set up as
Hugging Face transformers does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, raise_exception, strftime_now, tojson = json.dumps(ensure_ascii=False, ...),
{% generation %} renders its body) and passes variables exactly like `particle template`:
messages, tools (only when non-empty), add_generation_prompt (always, true or false, as
transformers' apply_chat_template does), bos_token, eos_token, then --var NAME=JSON overrides.  Writes the prompt (UTF-8) to stdout; on a
template error prints one line to stderr and exits 3."""
import argparse
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_gen"), [], [], body).set_lineno(lineno)

    def _gen(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


# Per-family BOS/EOS text (as in shared/fixtures/templates/SOURCES.md).
FAMILIES = [("gemma", "<bos>", "<eos>"), ("llama-3", "<|begin_of_text|>", "<|eot_id|>"),
            ("mistral", "<s>", "</s>"), ("sarvam", "<s>", "</s>"),
            ("deepseek", "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
             "<\uff5cend\u2581of\u2581sentence\uff5c>"),
            ("phi", "<|endoftext|>", "<|endoftext|>"), ("gpt-oss", "<|startoftext|>", "<|return|>"),
            ("qwen", "<|endoftext|>", "<|im_end|>"), ("glm", "[gMASK]", "<|endoftext|>")]
OPTION_SETS = [("gen", []), ("nogen", ["--no-generation-prompt"]), ("objargs", ["--object-arguments"]),
               ("think0", ["--var", "enable_thinking=false"]),
               ("think1", ["--var", "enable_thinking=true", "--no-generation-prompt"])]


def batch(out_dir, templates, convs):
    """Renders every template x conversation x option set; writes OUT/<case>.out (exit 0) or
    OUT/<case>.err, and OUT/cases.tsv: case, template, conversation, then particle args."""
    import os
    lines = []
    for t in templates:
        base = os.path.basename(t).rsplit(".", 1)[0]
        bos, eos = "<s>", "</s>"
        for key, b, e in FAMILIES:
            if key in base:
                bos, eos = b, e
                break
        for conv in convs:
            cname = os.path.basename(conv).rsplit(".", 1)[0]
            for oname, opts in OPTION_SETS:
                case = f"{base}__{cname}__{oname}"
                args = ["--template", t, "--messages", conv, "--bos-token", bos, "--eos-token", eos] + opts
                try:
                    out = render(parse(args))
                    with open(os.path.join(out_dir, case + ".out"), "wb") as f:
                        f.write(out.encode("utf-8"))
                except Exception as ex:  # an expected outcome: particle must fail too
                    with open(os.path.join(out_dir, case + ".err"), "w") as f:
                        f.write(f"{type(ex).__name__}: {ex}\n")
                lines.append("\t".join([case] + args))
    with open(os.path.join(out_dir, "cases.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def parse(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--messages", required=True)
    ap.add_argument("--tools")
    ap.add_argument("--bos-token", default="")
    ap.add_argument("--eos-token", default="")
    ap.add_argument("--no-generation-prompt", action="store_true")
    ap.add_argument("--object-arguments", action="store_true")
    ap.add_argument("--var", action="append", default=[])
    return ap.parse_args(argv)


def render(a):
    with open(a.messages, encoding="utf-8") as f:
        conv = json.load(f)
    tools = None
    if isinstance(conv, dict):
        msgs = conv["messages"]
        tools = conv.get("tools")
    else:
        msgs = conv
    if a.tools:
        with open(a.tools, encoding="utf-8") as f:
            tools = json.load(f)
    if a.object_arguments:  # llama.cpp: JSON-string arguments become objects
        for m in msgs:
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                if isinstance(fn.get("arguments"), str):
                    try:
                        obj = json.loads(fn["arguments"])
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        fn["arguments"] = obj
    ctx = {"messages": msgs}
    if tools:
        ctx["tools"] = tools
    ctx["add_generation_prompt"] = not a.no_generation_prompt
    ctx["bos_token"] = a.bos_token
    ctx["eos_token"] = a.eos_token
    for spec in a.var:
        name, _, val = spec.partition("=")
        ctx[name] = json.loads(val)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    with open(a.template, encoding="utf-8", newline="") as f:
        src = f.read()
    return env.from_string(src).render(**ctx)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "batch":
        batch(sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(","))
        return 0
    a = parse(sys.argv[1:])
    try:
        out = render(a)
    except Exception as e:  # any template failure is an expected outcome to compare
        print(f"{type(e).__name__}: {e}".splitlines()[0][:300], file=sys.stderr)
        return 3
    sys.stdout.buffer.write(out.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
