export { routeOf, routesOf, type Route } from "./routes.ts";
export { contractServices } from "./services.ts";
