// Cache-busting timestamps and an event body stamped with the time.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  http.get(`${BASE}/feed?ts=${Date.now()}`);
  const event = { type: 'page_view', at: Date.now(), page: '/home' };
  http.post(`${BASE}/events`, JSON.stringify(event), { headers: { 'Content-Type': 'application/json' } });
}
