// A value from a response header sent on the next request.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  const res = http.get(`${BASE}/session/new`);
  const requestId = res.headers['X-Request-Id'];
  http.get(`${BASE}/session/trace`, { headers: { 'X-Correlation-Id': requestId } });
  http.post(`${BASE}/session/trace/${requestId}`, JSON.stringify({ ok: true }));
}
