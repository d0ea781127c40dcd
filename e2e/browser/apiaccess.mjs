// Drives Debian's chromium through the home page and the API access page
// of an installation (docs/decisions.md "Home and API access pages"), at a phone's width: an admin signs in,
// creates a bot token (with the keyboard) and a webhook, revokes both,
// opens the home page and uninstalls the Kit after its confirmation; a
// member who opens the page gets the 403 page. Run by
// e2e/apiaccess_browser_test.go: the inputs come in the environment; at
// each step the script writes one JSON line to stdout and waits for one
// line on stdin, while the test uses what the page showed (the token on
// GET /auth/test, the webhook URL to post). Every page is saved as a
// screenshot to SHOTS.
import { chromium } from 'playwright-core';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const accessURL = env('ACCESS_URL');
const homeURL = env('HOME_URL');
const shots = env('SHOTS');
const channel = env('CHANNEL');

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
// step reports to the test and waits until it says go on.
const step = async (name, fields = {}) => {
  process.stdout.write(JSON.stringify({ step: name, ...fields }) + '\n');
  const { value, done } = await lines.next();
  if (done || value.trim() !== 'next') throw new Error(`the test stopped the script after ${name}`);
};

const phone = { width: 390, height: 844 };
let n = 0;
// shot saves the page and reports what a reader of the test needs of it.
const shot = async (page, name) => {
  const file = join(shots, `${String(++n).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const fits = await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
  return { file, fits, title: await page.title() };
};

const signIn = async (page, email, password) => {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
};

// tabTo presses Tab until the focused element is the button named name:
// the page is usable from the keyboard in document order.
const tabTo = async (page, name) => {
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.textContent.trim());
    if (focused === name) return i + 1;
  }
  throw new Error(`Tab never reached the button ${name}`);
};

let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-proxy-server',
    ],
  });
  const pages = {};
  const admin = await (await browser.newContext({ viewport: phone })).newPage();
  admin.setDefaultTimeout(20000);

  // Not signed in: the API access page sends the browser to sign-in first.
  await admin.goto(accessURL);
  pages.signin = await shot(admin, 'signin');
  await signIn(admin, env('ADMIN_EMAIL'), env('ADMIN_PASSWORD'));
  await admin.waitForURL((u) => u.href === accessURL);
  await admin.getByRole('heading', { name: /^API access: / }).waitFor();
  pages.access = await shot(admin, 'access');

  // A bot token, with the keyboard.
  const tabs = await tabTo(admin, 'Create bot token');
  await admin.keyboard.press('Enter');
  const token = await admin.getByLabel('New bot token').inputValue();
  pages.botToken = await shot(admin, 'bot-token-shown-once');
  await step('bot-token', { token, tabs });

  // A webhook for the channel.
  await admin.getByLabel('Channel for a new webhook').selectOption({ label: `#${channel}` });
  await admin.getByRole('button', { name: 'Create webhook' }).click();
  const webhookURL = await admin.getByLabel('New webhook URL').inputValue();
  pages.webhook = await shot(admin, 'webhook-shown-once');
  await step('webhook', { url: webhookURL });

  // Revoke both: the newest bot token is the last listed.
  await admin.getByRole('button', { name: /^Revoke the bot token created/ }).last().click();
  await admin.getByText('The bot token was revoked').waitFor();
  pages.tokenRevoked = await shot(admin, 'bot-token-revoked');
  await admin.getByRole('button', { name: /^Revoke the webhook of/ }).first().click();
  await admin.getByText('The webhook was revoked').waitFor();
  pages.webhookRevoked = await shot(admin, 'webhook-revoked');
  const afterRevoke = await admin.locator('main').innerText();
  await step('revoked', { page: afterRevoke });

  // The home page.
  await admin.goto(homeURL);
  pages.home = await shot(admin, 'home');
  const home = await admin.locator('main').innerText();

  // A member who opens the page gets the 403 page.
  const member = await (await browser.newContext({ viewport: phone })).newPage();
  member.setDefaultTimeout(20000);
  await member.goto(accessURL);
  await signIn(member, env('MEMBER_EMAIL'), env('MEMBER_PASSWORD'));
  await member.waitForURL((u) => u.href === accessURL);
  const again = await member.goto(accessURL);
  const memberStatus = again.status();
  pages.member403 = await shot(member, 'member-403');
  const memberPage = await member.locator('main').innerText();

  // Uninstall, after its confirmation.
  await admin.goto(accessURL);
  await admin.getByRole('link', { name: /^Uninstall / }).click();
  await admin.getByRole('heading', { name: /^Uninstall .*\?$/ }).waitFor();
  pages.uninstallConfirm = await shot(admin, 'uninstall-confirm');
  await admin.getByRole('button', { name: /^Uninstall / }).click();
  await admin.getByRole('heading', { name: / is uninstalled$/ }).waitFor();
  pages.uninstalled = await shot(admin, 'uninstalled');
  const gone = await admin.goto(accessURL);
  pages.gone404 = await shot(admin, 'uninstalled-404');
  await step('done', { home, memberStatus, memberPage, goneStatus: gone.status(), pages });
} finally {
  if (browser) await browser.close();
}
