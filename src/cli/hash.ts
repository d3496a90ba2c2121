// `dolphin hash`: the chained block hashes of a prompt, one 16-hex-digit hash per full block.

import { loadCoreModule } from "../../bindings/node/index.js";
import { pairsToHex } from "../hashing/hashes.js";
import { Router } from "../router/router.js";
import { ruleTable } from "../table/rule-table.js";
import { intOption, readStdin, UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin hash [--block-size N] [--model M] [--salt S] [--text] < input

Reads a JSON array of token ids on stdin (or raw UTF-8 text with --text) and prints one chained hash per full
block as 16 lowercase hex digits: llm-d's approximate prefix scheme, h_0 = xxh64(model ‖ "\\0" ‖ salt),
token blocks of --block-size ids (default 16), text blocks of 64 bytes. A trailing partial block is not hashed.`,
  options: {
    "block-size": { type: "string" },
    model: { type: "string" },
    salt: { type: "string" },
    text: { type: "boolean" },
  },
  async run(v) {
    const blockSize = intOption(v["block-size"], "block-size", 1, 4096, 16);
    const input = readStdin();
    const router = Router.create(ruleTable("always-local"), {
      module: loadCoreModule(),
      workers: [{ id: "w", role: "decode", capacityBlocks: 0 }],
      blockSize,
      maxPromptTokens: Math.max(16, Math.ceil(Buffer.byteLength(input) / 4) + 16),
      indexBlocks: 0,
      ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
      ...(v["salt"] !== undefined ? { salt: String(v["salt"]) } : {}),
    });
    let pairs: Uint32Array;
    if (v["text"]) pairs = router.hash({ text: input });
    else {
      let tokens: unknown;
      try {
        tokens = JSON.parse(input);
      } catch (e) {
        throw new UsageError(`stdin: expected a JSON array of token ids: ${(e as Error).message}`);
      }
      if (!Array.isArray(tokens)) throw new UsageError("stdin: expected a JSON array of token ids");
      tokens.forEach((t, i) => {
        if (!Number.isInteger(t) || t < 0 || t > 0xffffffff)
          throw new UsageError(`stdin: token [${i}] is not an integer in 0–4294967295: ${JSON.stringify(t)}`);
      });
      pairs = router.hash({ tokens: tokens as number[] });
    }
    const hex = pairsToHex(pairs);
    if (hex.length) process.stdout.write(hex.join("\n") + "\n");
    return 0;
  },
};
