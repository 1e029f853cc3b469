// The reference tokenizer of a tests/hf_vocab package: transformers.js's
// port of Hugging Face tokenizers (@lenml/tokenizers), with two things done
// the way Python transformers (and llama.cpp's converter) do them, where
// transformers.js does not:
// - the tokens of tokenizer_config.json's added_tokens_decoder are added:
//   transformers.js ignores that list, and InternLM2's chat tokens live only
//   there;
// - a LlamaTokenizerFast gets the post-processor that Python's
//   LlamaTokenizerFast.__init__ installs (update_post_processor,
//   src/transformers/models/llama/tokenization_llama_fast.py): bos_token
//   first when add_bos_token (default true), eos_token last when
//   add_eos_token. transformers.js keeps tokenizer.json's post_processor,
//   and DeepSeek V3's is a ByteLevel that adds nothing, so it would encode
//   without the BOS that Python, llama.cpp (tokenizer.ggml.add_bos_token
//   comes from add_bos_token) and ringlm add.
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
  const overrides = {};
  if (extra.length > 0) overrides.added_tokens = [...(json.added_tokens || []), ...extra];
  const postProcessor = llamaFastPostProcessor(pkg.tokenizerConfig);
  if (postProcessor) overrides.post_processor = postProcessor;
  if (Object.keys(overrides).length === 0) return pkg.fromPreTrained();
  return pkg.fromPreTrained({ tokenizerJSON: overrides });
}

// Python's LlamaTokenizerFast.update_post_processor as tokenizer.json's
// TemplateProcessing (single sequences only); null for other classes.
function llamaFastPostProcessor(config) {
  if (config.tokenizer_class !== 'LlamaTokenizerFast') return null;
  const content = (t) => (t && typeof t === 'object' ? t.content : t);
  const single = [];
  if (config.add_bos_token ?? true) single.push({ SpecialToken: { id: content(config.bos_token), type_id: 0 } });
  single.push({ Sequence: { id: 'A', type_id: 0 } });
  if (config.add_eos_token ?? false) single.push({ SpecialToken: { id: content(config.eos_token), type_id: 0 } });
  return { type: 'TemplateProcessing', single, pair: single, special_tokens: {} };
}

module.exports = { packageDir, reference };
