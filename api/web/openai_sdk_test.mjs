// Talks to a running ringlm API with the official `openai` npm package and
// checks the shapes it gets back: a plain chat completion and a streaming
// one with include_usage.
//
//   BASE_URL=http://127.0.0.1:8080 node api/web/openai_sdk_test.mjs
//
// Env: BASE_URL (required; "/v1" is appended unless present), API_KEY
// (optional), MODEL (default: the first id from /v1/models), MAX_TOKENS
// (default 16). Needs `npm ci` in api/web/. Exits 0 on success, 1 on failure.
import OpenAI from 'openai';

function check(cond, message) {
  if (!cond) throw new Error(message);
}
const isCount = (v) => Number.isInteger(v) && v >= 0;

function checkUsage(usage, where) {
  check(usage && typeof usage === 'object', `${where}: no usage`);
  check(isCount(usage.prompt_tokens) && usage.prompt_tokens > 0, `${where}: bad usage.prompt_tokens`);
  check(isCount(usage.completion_tokens) && usage.completion_tokens > 0,
        `${where}: bad usage.completion_tokens`);
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens,
        `${where}: total_tokens != prompt_tokens + completion_tokens`);
  check(usage.prompt_tokens_details && isCount(usage.prompt_tokens_details.cached_tokens),
        `${where}: bad usage.prompt_tokens_details.cached_tokens`);
}

async function main() {
  const base = process.env.BASE_URL;
  check(base, 'set BASE_URL to a running ringlm API, e.g. http://127.0.0.1:8080');
  const baseURL = /\/v1\/?$/.test(base) ? base : base.replace(/\/$/, '') + '/v1';
  const client = new OpenAI({ baseURL, apiKey: process.env.API_KEY || 'none', maxRetries: 0,
                              timeout: 300000 });
  const maxTokens = Number(process.env.MAX_TOKENS || 16);

  const models = await client.models.list();
  check(models.data.length > 0 && typeof models.data[0].id === 'string', 'models.list() is empty');
  const model = process.env.MODEL || models.data[0].id;
  const messages = [{ role: 'user', content: 'Say hello in five words.' }];

  // Plain call.
  const plain = await client.chat.completions.create({ model, messages, max_tokens: maxTokens });
  check(plain.object === 'chat.completion', `plain: object is ${plain.object}`);
  check(typeof plain.id === 'string' && plain.id, 'plain: no id');
  check(plain.choices.length === 1, `plain: ${plain.choices.length} choices`);
  const choice = plain.choices[0];
  check(choice.message.role === 'assistant', `plain: role ${choice.message.role}`);
  check(typeof choice.message.content === 'string', 'plain: content is not a string');
  check(['stop', 'length'].includes(choice.finish_reason), `plain: finish_reason ${choice.finish_reason}`);
  checkUsage(plain.usage, 'plain');
  check(plain.usage.completion_tokens <= maxTokens, 'plain: more completion tokens than max_tokens');

  // Streaming call with usage.
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    check(chunk.object === 'chat.completion.chunk', `stream: object is ${chunk.object}`);
    if (chunk.usage) {
      check(usage === null, 'stream: usage sent twice');
      usage = chunk.usage;
    }
    for (const c of chunk.choices) {
      check(c.index === 0, `stream: choice index ${c.index}`);
      if (c.delta && typeof c.delta.content === 'string') text += c.delta.content;
      if (c.finish_reason) {
        check(finish === null, 'stream: two finish reasons');
        finish = c.finish_reason;
      }
    }
  }
  check(chunks > 1, 'stream: fewer than two chunks');
  check(['stop', 'length'].includes(finish), `stream: finish_reason ${finish}`);
  checkUsage(usage, 'stream');
  // Greedy defaults are not set here, so only the shape is compared.
  check(typeof text === 'string', 'stream: no text');
  console.log(`openai_sdk_test: OK (model ${model}; plain ${JSON.stringify(choice.message.content)}, ` +
              `finish ${choice.finish_reason}; stream ${chunks} chunks, ${JSON.stringify(text)}, ` +
              `finish ${finish}, usage ${JSON.stringify(usage)})`);
}

main().catch((e) => {
  console.error('openai_sdk_test: FAIL: ' + (e && e.message || e));
  process.exitCode = 1;
});
