// qemu-exec.mjs - preloaded (node --import) into the emulated arm64 node: child processes
// that node forks (node-llama-cpp tests its binding in a child) start through node.sh, so
// they run under qemu-user too (the host kernel cannot run the aarch64 node directly).
import { fileURLToPath } from "node:url";
process.execPath = fileURLToPath(new URL("./node.sh", import.meta.url));
