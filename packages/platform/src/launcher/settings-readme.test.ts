import { test } from "node:test";
import { assertSettingsListed } from "@platform/config/testing";
import { LAUNCHER_SETTINGS } from "./config.ts";

test("the root README's launcher table is the one `main.ts --settings` prints from the declarations", () => {
  assertSettingsListed({
    readme: new URL("../../../../README.md", import.meta.url),
    section: "launcher",
    fields: LAUNCHER_SETTINGS,
    main: new URL("../main.ts", import.meta.url),
  });
});
