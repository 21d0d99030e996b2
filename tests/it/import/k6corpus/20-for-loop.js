// Paging through a listing with a counted loop.
import http from 'k6/http';
import { sleep } from 'k6';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const PAGES = 3;

export const options = { iterations: 1 };

export default function () {
  for (let page = 1; page <= PAGES; page++) {
    http.get(`${BASE}/articles?page=${page}&size=10`);
    sleep(0.01);
  }
  http.get(`${BASE}/articles/summary`);
}
