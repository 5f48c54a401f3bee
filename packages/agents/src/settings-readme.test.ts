import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { AGENTS_SETTINGS } from "./config.ts";

test("the README's settings table is the one `agents --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme: new URL("../README.md", import.meta.url),
    fields: AGENTS_SETTINGS,
    main: new URL("./main.ts", import.meta.url),
  });
});
