// node encode.js NODE_MODULES PACKAGE TEXTS.json: the reference token ids of
// each text (special-token texts parsed, nothing added), as a JSON array.
'use strict';
const fs = require('fs');
const { reference } = require('../hf_tokenizer/reference.js');

const path = require('path');
const [nodeModules, name, textsPath] = process.argv.slice(2).map((a, i) => (i === 1 ? a : path.resolve(a)));
const tok = reference(nodeModules, name);
const texts = JSON.parse(fs.readFileSync(textsPath, 'utf8'));
process.stdout.write(JSON.stringify(texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: false })))));
