// Log in, keep the token and the user's id, use both later.
import http from 'k6/http';
import { check, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = {
  vus: 1,
  iterations: 1,
  thresholds: { http_req_failed: ['rate==0'], http_req_duration: ['p(95)<1000'] },
};

export default function () {
  const login = http.post(`${BASE}/auth/login`, JSON.stringify({ username: 'alice', password: 'pw' }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(login, { 'login 200': (r) => r.status === 200, 'got token': (r) => r.json('token') !== '' });
  const { token } = login.json();
  const auth = { headers: { Authorization: `Bearer ${token}` } };
  sleep(0.05);
  const me = http.get(`${BASE}/users/me`, auth);
  const userId = me.json('user.id');
  http.get(`${BASE}/users/${userId}/orders`, auth);
  http.post(`${BASE}/auth/logout`, null, auth);
}
