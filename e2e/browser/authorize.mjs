// Drives Debian's chromium through the authorize flow of OPERATIONS.md
// section 3: sign in, read the consent page, approve, land on the Kit's
// redirect target. Run by e2e/browser_test.go, which passes its inputs in
// the environment and reads one JSON line from stdout.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const authorizeURL = env('AUTHORIZE_URL');
const redirectURL = env('REDIRECT_URL');

const userDataDir = mkdtempSync(join(tmpdir(), 'kitd-chromium-'));
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    ignoreHTTPSErrors: true, // the redirect target is a local test server with its own certificate
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-proxy-server',
    ],
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(20000);

  // Not signed in: the authorize page sends the browser to sign-in.
  await page.goto(authorizeURL);
  const signinURL = page.url();
  await page.getByLabel('Email').fill(env('EMAIL'));
  await page.getByLabel('Password').fill(env('PASSWORD'));
  await page.getByRole('button', { name: 'Sign in' }).click();

  // Back on the authorize page: the consent page.
  await page.waitForURL((u) => u.pathname === '/app/kits/authorize');
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  const consent = await page.locator('main').innerText();

  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL((u) => u.href.startsWith(redirectURL));
  const landed = await page.locator('body').innerText();
  process.stdout.write(JSON.stringify({ signinURL, consent, url: page.url(), landed }) + '\n');
} finally {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
