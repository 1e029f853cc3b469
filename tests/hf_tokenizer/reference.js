// The reference tokenizer of a tests/hf_vocab package: transformers.js's
// port of Hugging Face tokenizers (@lenml/tokenizers), with the tokens of
// tokenizer_config.json's added_tokens_decoder added the way Python
// transformers (and llama.cpp's converter) add them: transformers.js ignores
// that list, and InternLM2's chat tokens live only there.
'use strict';
const path = require('path');

function packageDir(nodeModules, name) {
  return path.join(nodeModules, '@lenml', 'tokenizer-' + name);
}

function reference(nodeModules, name) {
  const pkg = require(packageDir(nodeModules, name));
  const json = pkg.tokenizerJSON;
  const decoder = pkg.tokenizerConfig.added_tokens_decoder || {};
  const known = new Set((json.added_tokens || []).map((t) => t.id));
  const extra = [];
  for (const [id, t] of Object.entries(decoder)) {
    if (known.has(Number(id))) continue;
    extra.push({ id: Number(id), content: t.content, single_word: !!t.single_word,
                 lstrip: !!t.lstrip, rstrip: !!t.rstrip, normalized: !!t.normalized,
                 special: !!t.special });
  }
  if (extra.length === 0) return pkg.fromPreTrained();
  return pkg.fromPreTrained({ tokenizerJSON: { added_tokens: [...(json.added_tokens || []), ...extra] } });
}

module.exports = { packageDir, reference };
