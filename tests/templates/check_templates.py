#!/usr/bin/python3
"""Compares ringlm's C++ Jinja engine with Python's jinja2 on real templates.

For every chat template found in the npm tokenizer packages and every
conversation of corpus.json, renders the template the way Hugging Face
transformers' apply_chat_template does (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols; raise_exception, strftime_now and
HF's tojson) and with the C++ `jinja_render` tool, and requires byte-identical
output, or an error from both. strftime_now is pinned to a fixed time in both.

It also checks provenance: joining the C++ segments gives the same text, and
every content (non-control) segment is text that occurs in the conversation's
untrusted values (so template markers are never content, and forged markers
from a message never become control).

Exit status: 0 all identical, 1 any mismatch, 77 skipped (jinja2 or the npm
packages are missing).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
FIXED_NOW = datetime.datetime(2026, 7, 26, 12, 0, 0)
FIXED_EPOCH = int(
    FIXED_NOW.replace(tzinfo=datetime.timezone.utc).timestamp())
UNTRUSTED_KEYS = ("messages", "tools", "documents")


def skip(reason):
    print(f"skipped: {reason}")
    sys.exit(SKIP)


try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # pragma: no cover
    skip(f"jinja2 is not importable ({e})")


class AssistantTracker(jinja2.ext.Extension):
    """HF's {% generation %} block: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(
            self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None,
               sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(tok):
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def load_templates(packages):
    templates = []
    if not os.path.isdir(packages):
        return templates
    for name in sorted(os.listdir(packages)):
        path = os.path.join(packages, name, "models", "tokenizer_config.json")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        template = config.get("chat_template")
        if isinstance(template, list):
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("default")
        if not template:
            continue
        special = {}
        for key in ("bos_token", "eos_token", "unk_token", "sep_token",
                    "pad_token", "cls_token", "mask_token"):
            value = token_text(config.get(key))
            if value is not None:
                special[key] = value
        short = name[len("tokenizer-"):] if name.startswith("tokenizer-") else name
        templates.append((short, template, special))
    return templates


def build_context(conv, special):
    context = dict(special)
    context["messages"] = conv["messages"]
    # HF passes tools=None and documents=None when not given.
    context["tools"] = conv.get("tools")
    context["documents"] = None
    context["add_generation_prompt"] = conv.get("add_generation_prompt", True)
    context.update(conv.get("extra", {}))
    return context


def untrusted_strings(context):
    out = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v is not None:
            out.append(json.dumps(v))

    for key in UNTRUSTED_KEYS:
        walk(context.get(key))
    # tojson of a client string shows it JSON-escaped.
    out += [json.dumps(s, ensure_ascii=False) for s in list(out)]
    return out


def content_ok(segment_text, sources):
    """A content segment must come from client data: it occurs in (or, for
    tojson/str() output, contains) some untrusted string."""
    if any(segment_text in s for s in sources):
        return True
    # Case-mapped client text (upper/lower/title filters).
    lowered = segment_text.lower()
    if any(lowered in s.lower() for s in sources):
        return True
    # Pieces of tojson output split by other filters (indent): punctuation.
    if all(c in '{}[]:," \n' for c in segment_text):
        return True
    # Synthesized text (tojson of a tool, repr of a dict): every untrusted
    # string it shows is client data; accept if it contains one.
    return any(s and s in segment_text for s in sources) or \
        segment_text.strip() in ("", "None", "True", "False", "[]", "{}")


def run_cpp(renderer, template_path, context, segments):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                     encoding="utf-8") as f:
        json.dump(context, f, ensure_ascii=False)
        context_path = f.name
    try:
        cmd = [renderer, "--template", template_path, "--context", context_path,
               "--now", str(FIXED_EPOCH), "--untrusted", ",".join(UNTRUSTED_KEYS)]
        if segments:
            cmd.append("--segments")
        proc = subprocess.run(cmd, capture_output=True, timeout=60)
        return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")
    finally:
        os.unlink(context_path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--renderer", required=True)
    parser.add_argument("--packages", required=True)
    parser.add_argument("--corpus", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus.json"))
    parser.add_argument("--extra", help="folder of additional *.jinja templates "
                        "(rendered with bos_token <s>, eos_token </s>)")
    parser.add_argument("--only", help="template name filter")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    templates = load_templates(args.packages)
    if not templates:
        skip(f"no tokenizer packages with a chat_template under {args.packages}")
    if args.extra and os.path.isdir(args.extra):
        for fname in sorted(os.listdir(args.extra)):
            if fname.endswith(".jinja"):
                with open(os.path.join(args.extra, fname), encoding="utf-8") as f:
                    templates.append((f"extra/{fname[:-len('.jinja')]}", f.read(),
                                      {"bos_token": "<s>", "eos_token": "</s>"}))
    if not os.access(args.renderer, os.X_OK):
        print(f"renderer {args.renderer} is not executable")
        return 1
    with open(args.corpus, encoding="utf-8") as f:
        corpus = json.load(f)["conversations"]

    env = make_env()
    failures = 0
    for name, template, special in templates:
        if args.only and args.only not in name:
            continue
        compiled = env.from_string(template)
        with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False,
                                         encoding="utf-8") as f:
            f.write(template)
            template_path = f.name
        renders = identical = both_raised = mismatches = 0
        try:
            for conv in corpus:
                context = build_context(conv, special)
                try:
                    expected = compiled.render(**context).encode("utf-8")
                    expected_error = None
                except Exception as e:  # jinja2 raised: C++ must fail too
                    expected = None
                    expected_error = f"{type(e).__name__}: {e}"
                code, out, err = run_cpp(args.renderer, template_path, context,
                                         segments=True)
                renders += 1
                problem = None
                if expected is None:
                    if code != 0 and (expected_error.startswith("TemplateError: ")
                                      and expected_error[len("TemplateError: "):]
                                      not in err):
                        problem = (f"raise_exception message differs: jinja2 "
                                   f"{expected_error!r}, C++ {err.strip()!r}")
                    elif code != 0:
                        both_raised += 1
                        if args.verbose:
                            print(f"raised {name} / {conv['name']}:\n"
                                  f"  jinja2: {expected_error}\n  C++:    {err.strip()}")
                    else:
                        problem = (f"jinja2 raised {expected_error!r} but C++ "
                                   f"rendered {out[:300]!r}")
                elif code != 0:
                    problem = f"C++ failed: {err.strip()}"
                else:
                    segs = json.loads(out.decode("utf-8"))
                    text = "".join(s["text"] for s in segs).encode("utf-8")
                    if text != expected:
                        problem = diff_message(expected, text)
                    else:
                        sources = untrusted_strings(context)
                        bad = [s["text"] for s in segs
                               if not s["control"] and not content_ok(s["text"], sources)]
                        if bad:
                            problem = f"content segment not from client data: {bad[0][:200]!r}"
                        else:
                            identical += 1
                if problem:
                    mismatches += 1
                    print(f"MISMATCH {name} / {conv['name']}: {problem}")
                elif args.verbose:
                    print(f"ok {name} / {conv['name']}")
        finally:
            os.unlink(template_path)
        failures += mismatches
        print(f"{name}: {renders} renders, {identical} identical, "
              f"{both_raised} both raised, {mismatches} mismatches")
    if failures:
        print(f"FAILED: {failures} mismatches")
        return 1
    print("all templates identical")
    return 0


def diff_message(expected, actual):
    n = 0
    while n < min(len(expected), len(actual)) and expected[n] == actual[n]:
        n += 1
    lo = max(0, n - 80)
    return (f"outputs differ at byte {n}:\n  jinja2: {expected[lo:n + 120]!r}\n"
            f"  C++:    {actual[lo:n + 120]!r}")


if __name__ == "__main__":
    sys.exit(main())
