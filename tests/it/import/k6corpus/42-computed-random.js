// Random choices made when k6 runs: the requests that use them cannot be converted.
// not converted: 14
// k6-only: GET /category/*
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const CATEGORIES = ['books', 'music', 'games'];

export const options = { iterations: 1 };

export default function () {
  http.get(`${BASE}/home`);
  const category = CATEGORIES[Math.floor(Math.random() * CATEGORIES.length)];
  http.get(`${BASE}/category/${category}`);
  http.get(`${BASE}/category/books`);
}
