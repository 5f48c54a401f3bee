import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { IDENTITY_SETTINGS } from "./settings.ts";

test("the README's settings table is the one `identity --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme: new URL("../../README.md", import.meta.url),
    fields: IDENTITY_SETTINGS,
    main: new URL("../main.ts", import.meta.url),
  });
});
