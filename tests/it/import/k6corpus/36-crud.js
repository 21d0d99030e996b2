// Create, read, update and delete one resource, by the id the create returned.
import http from 'k6/http';
import { check, sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const params = { headers: { 'Content-Type': 'application/json' } };

export const options = { vus: 1, iterations: 1, thresholds: { checks: ['rate==1'] } };

export default function () {
  const created = http.post(`${BASE}/crocodiles`, JSON.stringify({ name: 'Croc', sex: 'M', date_of_birth: '2019-01-01' }), params);
  check(created, { 'created': (r) => r.status === 200, 'has id': (r) => r.json('id') !== undefined });
  const id = created.json('id');
  const url = `${BASE}/crocodiles/${id}`;
  let res = http.get(url);
  check(res, { 'read': (r) => r.status === 200 });
  res = http.put(url, JSON.stringify({ name: 'New Croc', sex: 'M', date_of_birth: '2019-01-01' }), params);
  check(res, { 'updated': (r) => r.status === 200 });
  sleep(0.01);
  res = http.del(url, null, params);
  check(res, { 'deleted': (r) => r.status === 200 });
}
