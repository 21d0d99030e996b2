// Redirect settings: none followed for the whole test, and per request.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1, maxRedirects: 0 };

export default function () {
  http.get(`${BASE}/old-home`);
  http.get(`${BASE}/go/docs`, { redirects: 0 });
  http.get(`${BASE}/go/blog`, { redirects: 3 });
}
