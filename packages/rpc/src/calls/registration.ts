import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";

/** A service and its (possibly partial) Connect implementation. */
export interface ServiceRegistration<S extends DescService = DescService> {
  service: S;
  // biome-ignore lint/suspicious/noExplicitAny: each registration has its own service type
  impl: Partial<ServiceImpl<any>>;
}
