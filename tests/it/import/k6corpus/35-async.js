// An async default function awaiting each request.
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default async function () {
  const res = await http.asyncRequest('GET', `${BASE}/async/first`);
  check(res, { 'first ok': (r) => r.status === 200 });
  await http.asyncRequest('POST', `${BASE}/async/second`, JSON.stringify({ n: 2 }), {
    headers: { 'Content-Type': 'application/json' },
  });
}
