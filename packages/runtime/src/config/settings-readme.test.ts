import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { ROUTER_LISTING } from "../router/config.ts";
import { WORKER_SETTINGS } from "../worker/config.ts";

const readme = new URL("../../README.md", import.meta.url);

test("the README's router table is the one `router --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme,
    section: "router",
    fields: ROUTER_LISTING,
    main: new URL("../router/main.ts", import.meta.url),
  });
});

test("the README's worker table is the one `worker --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme,
    section: "worker",
    fields: WORKER_SETTINGS,
    main: new URL("../worker/main.ts", import.meta.url),
  });
});
