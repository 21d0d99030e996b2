// Every method, through the shortcuts and through http.request.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  http.request('GET', `${BASE}/items/i-1`);
  http.request('PATCH', `${BASE}/items/i-1`, JSON.stringify({ name: 'renamed' }), {
    headers: { 'Content-Type': 'application/json' },
  });
  http.head(`${BASE}/items/i-1`);
  http.options(`${BASE}/items`);
  http.del(`${BASE}/items/i-1`, null, { headers: { 'X-Reason': 'cleanup' } });
  http.request('DELETE', `${BASE}/items/i-2`, JSON.stringify({ hard: true }));
}
