import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { E2B_SETTINGS } from "./config.ts";

test("the README's settings table is the one `e2b --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme: new URL("../README.md", import.meta.url),
    fields: E2B_SETTINGS,
    main: new URL("./main.ts", import.meta.url),
  });
});
