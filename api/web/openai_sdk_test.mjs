// Talks to a running ringlm API with the official `openai` npm package and
// checks the shapes it gets back: a plain chat completion, a streaming one
// with include_usage, logprobs, and the Responses API (plain and streamed).
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
  // Logprobs: one entry per token, alternatives sorted best first.
  const withLogprobs = await client.chat.completions.create({
    model, messages, max_tokens: maxTokens, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const entries = withLogprobs.choices[0].logprobs && withLogprobs.choices[0].logprobs.content;
  check(Array.isArray(entries) && entries.length > 0, 'logprobs: no content entries');
  check(entries.map((e) => e.token).join('') === withLogprobs.choices[0].message.content,
        'logprobs: the tokens do not spell the content');
  for (const e of entries) {
    check(typeof e.logprob === 'number' && e.logprob <= 0, `logprobs: bad logprob ${e.logprob}`);
    check(e.top_logprobs.length === 3, `logprobs: ${e.top_logprobs.length} alternatives`);
    for (let k = 1; k < 3; ++k) {
      check(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob, 'logprobs: not sorted');
    }
    check(e.top_logprobs[0].token === e.token, 'logprobs: greedy token is not the best one');
  }

  // The Responses API, the SDK's default: output_text is the SDK's own join.
  const response = await client.responses.create({
    model, instructions: 'Be brief.', input: 'Say hello.', max_output_tokens: maxTokens,
  });
  check(response.object === 'response', `responses: object is ${response.object}`);
  check(['completed', 'incomplete'].includes(response.status), `responses: status ${response.status}`);
  check(typeof response.output_text === 'string' && response.output_text.length > 0,
        'responses: no output_text');
  check(response.usage.output_tokens > 0 && response.usage.output_tokens <= maxTokens,
        `responses: output_tokens ${response.usage.output_tokens}`);
  const events = await client.responses.create({
    model, input: 'Say hello.', max_output_tokens: maxTokens, stream: true,
  });
  let streamedText = '';
  let final = null;
  for await (const event of events) {
    if (event.type === 'response.output_text.delta') streamedText += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event;
  }
  check(final !== null, 'responses stream: no final event');
  check(final.response.output[0].content[0].text === streamedText,
        'responses stream: the deltas do not add up to the final text');

  console.log(`openai_sdk_test: OK (model ${model}; plain ${JSON.stringify(choice.message.content)}, ` +
              `finish ${choice.finish_reason}; stream ${chunks} chunks, ${JSON.stringify(text)}, ` +
              `finish ${finish}, usage ${JSON.stringify(usage)}; logprobs ${entries.length} ` +
              `entries; responses ${JSON.stringify(response.output_text)}, streamed ` +
              `${JSON.stringify(streamedText)})`);
}

main().catch((e) => {
  console.error('openai_sdk_test: FAIL: ' + (e && e.message || e));
  process.exitCode = 1;
});
