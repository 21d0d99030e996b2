// A try block, and a fallback request in the catch that k6 runs only on an exception.
// not converted: 14
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  try {
    const res = http.get(`${BASE}/primary`);
    http.get(`${BASE}/primary/details`);
  } catch (e) {
    http.get(`${BASE}/fallback`);
  } finally {
    http.get(`${BASE}/audit`);
  }
}
