// The zoo's Node.js server: Node's own `http` module, one event loop, every request burning
// CPU_MS (argv[2], default 2) of synchronous hashing before a 64-byte answer; so one core,
// at most 1000 / CPU_MS requests per second. /stats is its own counter (requests answered).
// Prints "listening on URL".
const http = require("http");
const crypto = require("crypto");
const cpuMs = Number(process.argv[2] || "2");
const body = "x".repeat(63) + "\n";
let requests = 0;

function burn(ms) {
  const end = process.cpuUsage().user + ms * 1000;
  let block = Buffer.from("loadgen");
  while (process.cpuUsage().user < end) {
    for (let i = 0; i < 50; i++) block = crypto.createHash("sha256").update(block).digest();
  }
}

const server = http.createServer((req, res) => {
  if (req.url === "/stats") {
    res.end(JSON.stringify({ requests }));
    return;
  }
  burn(cpuMs);
  requests++;
  res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
