// A TypeScript script: interfaces, typed options, casts and non-null assertions.
import http, { RefinedResponse, ResponseType } from 'k6/http';
import { check } from 'k6';
import { Options } from 'k6/options';

interface LoginBody {
  user: string;
  password: string;
}

type Headers = Record<string, string>;

const BASE: string = __ENV.BASE_URL || 'http://127.0.0.1:1';
const headers: Headers = { 'Content-Type': 'application/json' };

export const options: Options = {
  vus: 1,
  iterations: 1,
};

export default function (): void {
  const body: LoginBody = { user: 'alice', password: 'wonderland' };
  const res: RefinedResponse<ResponseType> = http.post(`${BASE}/login`, JSON.stringify(body), { headers });
  check(res, { 'logged in': (r) => r.status === 200 });
  const token = res.json('token') as string;
  http.get(`${BASE}/me`, { headers: { Authorization: `Bearer ${token!}` } as Headers });
}
