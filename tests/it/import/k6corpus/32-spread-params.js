// Shared params spread into each request's own.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const COMMON = { headers: { 'X-Client': 'loadtest', Accept: 'application/json' }, timeout: '10s' };

export const options = { iterations: 1 };

export default function () {
  http.get(`${BASE}/reports`, { ...COMMON, tags: { name: 'reports' } });
  const headers = { ...COMMON.headers, 'X-Trace': 'on' };
  http.get(`${BASE}/reports/weekly`, { headers });
}
