#!/usr/bin/python3
"""The prompts the API builds, on real templates and real vocabularies.

For each tests/hf_vocab package whose tokenizer ringlm implements and whose
tokenizer_config.json has a chat template: `ringlm synth --tokenizer` writes a
model carrying both; chat_prompt_tool then builds, through the server's own
code (request parser, the model's template in ringlm's Jinja engine,
EncodeSegments), the prompt of every conversation of tests/templates/corpus.json
that a chat request can express. Each must equal what Hugging Face would
build from the same request:
  - the text: jinja2 under transformers' settings, given the messages as
    ringlm passes them (content a string, tool-call arguments an object) --
    minus a leading bos_token, which the tokenizer adds itself;
  - the ids: transformers.js's tokenizer over jinja2's text (its bos_token
    included), special-token texts parsed. Conversations whose content holds
    special-token text are compared by text only: there ringlm keeps the
    client's text plain by design. So are texts that Qwen's NFC normalizer
    would change: GGUF has no normalizer, and llama.cpp does not apply it
    either. Requests the API refuses (null user content, unknown roles) are
    counted, not compared; so are prompts the template leaves empty (apart
    from bos_token), which ringlm refuses as "rendered nothing".

  check.py --ringlm BIN --tool chat_prompt_tool --packages NODE_MODULES \
           --corpus corpus.json --tmp DIR

Prints one line per package; exits 1 on any difference, 77 (skip) when
jinja2, node or the packages are missing.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "templates"))
import check_templates as ct  # noqa: E402  (skips with 77 without jinja2)

PACKAGES = ["llama3_2", "qwen2_5", "qwen3", "gemma3", "internlm2", "deepseek_v3", "mistral_nemo"]
# Templates whose tool conversations ringlm renders in their own shape
# (chat/template_shape.h): DeepSeek V3's never shows `tools` (ringlm tells
# them in a system message) and shows an assistant turn's calls only when
# its content is none. jinja2 given the request as is would show neither, so
# these conversations are left to api/tool_calls_server_test and counted.
TOOL_SHAPED = {"deepseek_v3"}


def uses_tools(conv):
    return bool(conv.get("tools")) or any(
        m.get("tool_calls") or m["role"] == "tool" for m in conv["messages"])


def as_ringlm_passes(messages):
    """The messages as ChatRenderer gives them to the template."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p["text"] for p in content)
        msg = {"role": "system" if m["role"] == "developer" else m["role"],
               "content": content if content is not None else ""}
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                args = c["function"].get("arguments", {})
                if isinstance(args, str):
                    args = json.loads(args)
                calls.append({"id": c.get("id", ""), "type": "function",
                              "function": {"name": c["function"]["name"], "arguments": args}})
            msg["tool_calls"] = calls
        if m["role"] == "tool":
            msg["tool_call_id"] = m.get("tool_call_id", "")
        out.append(msg)
    return out


def expressible(conv):
    """A chat request can say it: a generation prompt, no template kwargs."""
    if conv.get("add_generation_prompt", True) is not True or conv.get("extra"):
        return False
    for m in conv["messages"]:
        if isinstance(m.get("content"), list) and any(p.get("type") != "text" for p in m["content"]):
            return False  # images and the like: the API refuses them
    return all(m["role"] != "tool" or "tool_call_id" in m for m in conv["messages"])


def main():
    p = argparse.ArgumentParser()
    for flag in ("--ringlm", "--tool", "--packages", "--corpus", "--tmp"):
        p.add_argument(flag, required=True)
    args = p.parse_args()
    if shutil.which("node") is None:
        ct.skip("node is not installed")
    lenml = os.path.join(args.packages, "@lenml")
    if not os.path.isdir(os.path.join(lenml, "tokenizers")):
        ct.skip(f"{lenml}/tokenizers is missing (npm ci in tests/hf_vocab)")
    with open(args.corpus, encoding="utf-8") as f:
        corpus = [c for c in json.load(f)["conversations"] if expressible(c)]
    templates = {name: (template, special) for name, template, special in ct.load_templates(lenml)}
    env = ct.make_env()
    # The server's strftime_now is the real clock.
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    os.makedirs(args.tmp, exist_ok=True)
    failed = False
    for name in PACKAGES:
        template, special = templates[name]
        gguf = os.path.join(args.tmp, name + ".gguf")
        subprocess.run([args.ringlm, "synth", "--tokenizer",
                        os.path.join(lenml, "tokenizer-" + name, "models"), "--out", gguf],
                       check=True, stdout=subprocess.DEVNULL)
        requests = [{"messages": c["messages"], **({"tools": c["tools"]} if c.get("tools") else {})}
                    for c in corpus]
        req_path = os.path.join(args.tmp, name + "-requests.json")
        with open(req_path, "w", encoding="utf-8") as f:
            json.dump(requests, f, ensure_ascii=False)
        ours = json.loads(subprocess.run([args.tool, gguf, req_path], check=True,
                                         capture_output=True, text=True).stdout)
        os.unlink(gguf)
        compiled = env.from_string(template)
        with open(os.path.join(lenml, "tokenizer-" + name, "models", "tokenizer.json"),
                  encoding="utf-8") as f:
            normalizes_nfc = '"NFC"' in json.dumps(json.load(f).get("normalizer"))
        texts, refs, problems = [], [], []
        same_text = both_refused = refused_by_api = nfc_only = tool_shaped = 0
        for conv, mine in zip(corpus, ours):
            if name in TOOL_SHAPED and uses_tools(conv):
                tool_shaped += 1
                continue
            context = dict(special)
            context.update(messages=as_ringlm_passes(conv["messages"]), tools=conv.get("tools"),
                           documents=None, add_generation_prompt=True)
            try:
                ref = compiled.render(**context)
            except Exception as e:  # noqa: BLE001  (jinja2 raises many kinds)
                if "error" in mine:
                    both_refused += 1
                else:
                    problems.append(f"{conv['name']}: jinja2 raised {e!r}, ringlm did not")
                continue
            if "error" in mine and "ringlm.api/param" in mine["error"]:
                refused_by_api += 1  # not a valid OpenAI request (null user content, ...)
                continue
            bos = special.get("bos_token")
            if "error" in mine and "rendered nothing" in mine["error"] and ref in ("", bos):
                both_refused += 1  # an empty prompt (Mistral's for a system message alone)
                continue
            if "error" in mine:
                problems.append(f"{conv['name']}: ringlm refused: {mine['error']}")
                continue
            expected = ref[len(bos):] if bos and ref.startswith(bos) and not mine["text"].startswith(bos) else ref
            if mine["text"] != expected:
                problems.append(f"{conv['name']}: text differs:\n  hf     {expected[:300]!r}\n"
                                f"  ringlm {mine['text'][:300]!r}")
                continue
            same_text += 1
            contents = json.dumps([m.get("content") for m in conv["messages"]], ensure_ascii=False)
            if any(t in contents for t in ("<|", "<s>", "</s>", "<start_of_turn>", "<bos>", "[INST]")):
                continue  # special-token text in content: text only
            if normalizes_nfc and unicodedata.normalize("NFC", ref) != ref:
                nfc_only += 1  # Qwen's NFC normalizer: llama.cpp and ringlm do not apply it
                continue
            texts.append(ref)
            refs.append(mine["ids"])
        texts_path = os.path.join(args.tmp, name + "-texts.json")
        with open(texts_path, "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)
        hf_ids = json.loads(subprocess.run(
            ["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "encode.js"),
             args.packages, name, texts_path], check=True, capture_output=True, text=True).stdout)
        same_ids = 0
        for text, mine, theirs in zip(texts, refs, hf_ids):
            if mine == theirs:
                same_ids += 1
            else:
                problems.append(f"ids differ for {text[:120]!r}:\n  hf     {theirs[:40]}\n"
                                f"  ringlm {mine[:40]}")
        print(f"{name}: {same_text}/{len(corpus)} prompts identical to jinja2 ({both_refused} "
              f"refused by the template or empty in both, {refused_by_api} not valid OpenAI requests); ids "
              f"identical to Hugging Face's tokenizer for {same_ids}/{len(texts)} (text only: "
              f"{nfc_only} needing NFC)" +
              (f"; {tool_shaped} with tools left to the API tests" if tool_shaped else ""))
        for problem in problems:
            print("  " + problem)
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
