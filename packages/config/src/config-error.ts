import { Code, PlatformError } from "@platform/errors";

/**
 * A setting that is missing or invalid. Every service and the launcher throw
 * this one type at start-up; `setting` names the variable, and the message
 * starts with it, so main can print it as it is and exit 2.
 */
export class ConfigError extends PlatformError {
  override name = "ConfigError";
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(Code.InvalidArgument, "invalid_configuration", message, { setting });
  }
}
