import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { COMPUTE_SETTINGS } from "./config.ts";
import { EGRESS_PROXY_SETTINGS } from "./egress/config.ts";

test("the README's settings table is the one `compute --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme: new URL("../README.md", import.meta.url),
    fields: COMPUTE_SETTINGS,
    main: new URL("./main.ts", import.meta.url),
  });
});

test("the README's egress-proxy settings table is the one `egress/main.ts --settings` prints", () => {
  assertSettingsListed({
    readme: new URL("../README.md", import.meta.url),
    fields: EGRESS_PROXY_SETTINGS,
    main: new URL("./egress/main.ts", import.meta.url),
    section: "egress-proxy",
  });
});
