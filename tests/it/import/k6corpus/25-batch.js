// A page load: the document, then its assets fetched in parallel with http.batch.
// not converted: 13
// k6-only: GET /static/app.js
// k6-only: GET /static/app.css
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';

export const options = { iterations: 1 };

export default function () {
  http.get(`${BASE}/landing`);
  http.batch([
    ['GET', `${BASE}/static/app.js`],
    ['GET', `${BASE}/static/app.css`],
  ]);
  http.get(`${BASE}/api/landing-data`);
}
