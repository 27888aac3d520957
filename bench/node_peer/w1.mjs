// eventsource-parser on a workload's exact chunks, for the side-by-side figures.
//
//   node bench/node_peer/w1.mjs CHUNKS_FILE [ROUNDS] [PARSER_DIR]
//
// CHUNKS_FILE: the chunks as the Python bench feeds them, each a little-endian u32
// length then its bytes (test_side_by_side.write_chunks). Two ways are timed, round
// after round: "bytes" (TextDecoder in streaming mode, then feed: what
// EventSourceParserStream does, and what our decoders do), and "text" (the chunks
// decoded beforehand, the parser alone). Prints one JSON object: best and median
// seconds of each, and the events and data length seen (checked equal every round).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [file, roundsArg, parserDir] = process.argv.slice(2);
if (!file) {
  console.error("usage: node w1.mjs CHUNKS_FILE [ROUNDS] [PARSER_DIR]");
  process.exit(2);
}
const rounds = Number(roundsArg ?? 5);
const dir = resolve(parserDir ?? new URL("../../tests/ts_server/node_modules/eventsource-parser", import.meta.url).pathname);
const { createParser } = await import(pathToFileURL(resolve(dir, "dist/index.js")).href);
const version = JSON.parse(readFileSync(resolve(dir, "package.json"), "utf8")).version;

const raw = readFileSync(file);
const chunks = [];
for (let at = 0; at < raw.length; ) {
  const n = raw.readUInt32LE(at);
  chunks.push(raw.subarray(at + 4, at + 4 + n));
  at += 4 + n;
}
const texts = (() => {
  const decoder = new TextDecoder("utf-8");
  return chunks.map((c) => decoder.decode(c, { stream: true }));
})();

function run(mode) {
  let events = 0;
  let size = 0;
  const parser = createParser({
    onEvent(event) {
      events++;
      size += event.data.length;
    },
  });
  if (mode === "bytes") {
    const decoder = new TextDecoder("utf-8");
    for (const chunk of chunks) parser.feed(decoder.decode(chunk, { stream: true }));
  } else {
    for (const text of texts) parser.feed(text);
  }
  return [events, size];
}

const modes = ["bytes", "text"];
const times = { bytes: [], text: [] };
let seen = null;
for (let r = 0; r < rounds; r++) {
  // each round starts with the other mode, as the Python side interleaves contenders
  for (const mode of r % 2 ? [...modes].reverse() : modes) {
    const start = process.hrtime.bigint();
    const result = run(mode);
    times[mode].push(Number(process.hrtime.bigint() - start) / 1e9);
    if (seen === null) seen = result;
    else if (result[0] !== seen[0] || result[1] !== seen[1]) throw new Error(`mismatch: ${result} vs ${seen}`);
  }
}
const stats = (t) => {
  const s = [...t].sort((a, b) => a - b);
  return { best: s[0], median: s[Math.floor(s.length / 2)] };
};
console.log(
  JSON.stringify({
    parser: `eventsource-parser ${version}`,
    node: process.version,
    chunks: chunks.length,
    bytes: raw.length - 4 * chunks.length,
    events: seen[0],
    data_size: seen[1],
    rounds,
    bytes_in: stats(times.bytes),
    text_in: stats(times.text),
  }),
);
