// Tool calling and structured output with the official `openai` npm package,
// against a running ringlm API whose model has a tool-capable chat template
// (e.g. a `ringlm synth --tokenizer` model with Qwen 2.5's vocabulary). The
// model may have random weights: tool_choice "required" (and a named choice)
// makes the server's grammar force a call, and json_schema forces the shape.
//
//   BASE_URL=http://127.0.0.1:8080 node api/web/openai_tools_test.mjs
//
// A round trip: a request with tools, a tool_calls reply (whole, then
// streamed), the tool's result sent back, then the answer; then schemas that
// leave additionalProperties out. Exits 0 on success. ONLY=open_schemas runs
// just the last part (for templates without tool results, say).
import OpenAI from 'openai';

function check(cond, message) {
  if (!cond) throw new Error(message);
}

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 12 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
}, {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } },
}];

function checkWeatherCall(call, where) {
  check(call.type === 'function', `${where}: call type ${call.type}`);
  check(typeof call.id === 'string' && call.id.startsWith('call_'), `${where}: call id ${call.id}`);
  check(call.function.name === 'get_weather', `${where}: called ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  check(typeof args.city === 'string' && [...args.city].length <= 12, `${where}: city ${args.city}`);
  check(['celsius', 'fahrenheit'].includes(args.unit), `${where}: unit ${args.unit}`);
  return args;
}

// Tools as llama.cpp's own tests declare them: no additionalProperties. The
// grammar closes each object after its declared keys (issue 38), so even a
// random-weight model ends in a call with only those keys, not in invented
// keys until max_tokens. (get_weather's string is bounded so that a random
// model cannot spend max_tokens inside it.)
const openTools = [{
  type: 'function',
  function: {
    name: 'special_function',
    description: "I'm special",
    parameters: { type: 'object', properties: { arg1: { type: 'integer', description: 'The arg.' } },
                  required: ['arg1'] },
  },
}, {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: {
      city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                  required: ['city'] },
  },
}];

function checkOnlyKeys(value, declared, required, where) {
  check(value !== null && typeof value === 'object' && !Array.isArray(value),
        `${where}: not an object: ${JSON.stringify(value)}`);
  for (const key of Object.keys(value)) {
    check(declared.includes(key), `${where}: undeclared key ${key} in ${JSON.stringify(value)}`);
  }
  for (const key of required) check(key in value, `${where}: missing ${key}`);
}

async function checkOpenSchemas(client, model) {
  const summary = [];
  for (const seed of [11, 12, 13]) {
    const reply = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Call a function.' }], tools: openTools,
      tool_choice: 'required', max_tokens: 300, seed,
    });
    const choice = reply.choices[0];
    const where = `open schema, seed ${seed}`;
    check(choice.finish_reason === 'tool_calls',
          `${where}: finish_reason ${choice.finish_reason}, content ${JSON.stringify(choice.message.content)}`);
    check(choice.message.tool_calls?.length === 1, `${where}: ${choice.message.tool_calls?.length} calls`);
    const fn = choice.message.tool_calls[0].function;
    const args = JSON.parse(fn.arguments);
    if (fn.name === 'special_function') {
      checkOnlyKeys(args, ['arg1'], ['arg1'], where);
      check(Number.isInteger(args.arg1), `${where}: arg1 ${args.arg1}`);
    } else {
      check(fn.name === 'get_weather', `${where}: called ${fn.name}`);
      checkOnlyKeys(args, ['city', 'days'], ['city'], where);
    }
    summary.push(`${fn.name}(${fn.arguments})`);
  }
  // The same for response_format json_schema.
  const person = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'A person, as JSON.' }], max_tokens: 300, seed: 14,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: {
      type: 'object', properties: { name: { type: 'string', maxLength: 20 },
                                    age: { type: 'integer', minimum: 0, maximum: 130 } },
      required: ['name'] } } },
  });
  check(person.choices[0].finish_reason === 'stop',
        `open json_schema: finish_reason ${person.choices[0].finish_reason}`);
  checkOnlyKeys(JSON.parse(person.choices[0].message.content), ['name', 'age'], ['name'],
                'open json_schema');
  summary.push(`json_schema ${person.choices[0].message.content}`);
  return summary.join('; ');
}

async function main() {
  const base = process.env.BASE_URL;
  check(base, 'set BASE_URL to a running ringlm API');
  const baseURL = /\/v1\/?$/.test(base) ? base : base.replace(/\/$/, '') + '/v1';
  const client = new OpenAI({ baseURL, apiKey: process.env.API_KEY || 'none', maxRetries: 0,
                              timeout: 300000 });
  const model = (await client.models.list()).data[0].id;
  if (process.env.ONLY === 'open_schemas') {
    console.log(`openai_tools_test: OK (model ${model}; open schemas: ` +
                `${await checkOpenSchemas(client, model)})`);
    return;
  }
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

  // 1. A call is required: any of the tools.
  const first = await client.chat.completions.create({
    model, messages, tools, tool_choice: 'required', max_tokens: 200, seed: 7,
  });
  const choice = first.choices[0];
  check(choice.finish_reason === 'tool_calls', `required: finish_reason ${choice.finish_reason}`);
  check(choice.message.tool_calls.length === 1, `required: ${choice.message.tool_calls.length} calls`);
  const call = choice.message.tool_calls[0];
  check(['get_weather', 'get_time'].includes(call.function.name), `required: ${call.function.name}`);
  JSON.parse(call.function.arguments);

  // 2. Streamed, with the function named: deltas add up to one call.
  const stream = await client.chat.completions.create({
    model, messages, tools, max_tokens: 200, seed: 8, stream: true,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls || []) {
        calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].function.name += d.function.name;
        if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(finish === 'tool_calls', `stream: finish_reason ${finish}`);
  check(calls.length === 1, `stream: ${calls.length} calls`);
  const args = checkWeatherCall(calls[0], 'stream');

  // 3. The tool's result goes back; the model answers.
  const answer = await client.chat.completions.create({
    model, tools, tool_choice: 'none', max_tokens: 16, seed: 9,
    messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [calls[0]] },
      { role: 'tool', tool_call_id: calls[0].id, content: `18 degrees ${args.unit} and sunny` }],
  });
  check(['stop', 'length'].includes(answer.choices[0].finish_reason),
        `answer: finish_reason ${answer.choices[0].finish_reason}`);
  check(typeof answer.choices[0].message.content === 'string', 'answer: no content');
  check(answer.usage.prompt_tokens > first.usage.prompt_tokens, 'answer: the history was not rendered');

  // 4. Structured output: json_schema.
  const person = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'A person, as JSON.' }], max_tokens: 200, seed: 10,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: {
      type: 'object', properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
      required: ['name', 'age'], additionalProperties: false } } },
  });
  const p = JSON.parse(person.choices[0].message.content);
  check(typeof p.name === 'string' && Number.isInteger(p.age) && p.age >= 0 && p.age <= 130,
        `json_schema: ${person.choices[0].message.content}`);

  // 5. Schemas without additionalProperties close.
  const open = await checkOpenSchemas(client, model);

  console.log(`openai_tools_test: OK (model ${model}; required -> ${call.function.name}` +
              `(${call.function.arguments}); streamed get_weather(${calls[0].function.arguments}); ` +
              `answer ${JSON.stringify(answer.choices[0].message.content)}; ` +
              `json_schema ${person.choices[0].message.content}; open schemas: ${open})`);
}

main().catch((e) => {
  console.error('openai_tools_test: FAIL: ' + (e && e.message || e));
  process.exitCode = 1;
});
