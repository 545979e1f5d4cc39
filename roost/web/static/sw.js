// roost web's service worker: Web Push messages become notifications, even with no page open;
// a click on one focuses the page (or opens it). It caches nothing: the page is live or absent.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let m = {};
  try { m = event.data ? event.data.json() : {}; } catch (err) { m = { body: event.data.text() }; }
  const title = m.title || "roost";
  event.waitUntil(self.registration.showNotification(title, {
    body: m.body || "",
    tag: m.tag || "roost",
    icon: "/static/icon.svg",
    data: { url: m.url || "/", key: m.key || "" },
  }));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin).href;
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const client of windows) {
      if (new URL(client.url).origin === self.location.origin && "focus" in client) return client.focus();
    }
    return self.clients.openWindow(url);
  })());
});
