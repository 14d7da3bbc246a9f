// One POST of a JSON body over a keep-alive agent, answered with its status and text: the benches' client call
// (node:http directly: fetch's own work would be measured with the server's).
import { Agent, request } from "node:http";

/** POSTs `body` (JSON) to `path` on `url`'s host through `agent`, with `headers` added; resolves with the answer. */
export function post(url: URL, path: string, agent: Agent, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, method: "POST", agent, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
