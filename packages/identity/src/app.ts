import { type Database, openDatabase } from "@platform/db";
import type { ServiceTls } from "@platform/rpc";
import type { DestinationStream, Logger } from "pino";
import type { InvalidationListener } from "./cache/invalidation-listener.ts";
import type { Settings } from "./config/settings.ts";
import { migrateIdentity } from "./db/migrations.ts";
import type { IdentityDB } from "./db/schema.ts";
import { createIdentity, type Identity } from "./identity.ts";
import { type RotationSchedule, startRotationSchedule } from "./keys/rotation-schedule.ts";
import { createLogger } from "./logger.ts";
import { lowerThreadpoolPriority } from "./passwords/hashing-priority.ts";
import { createIdentityServers, type IdentityServers } from "./server/servers.ts";

export type App = {
  identity: Identity;
  servers: IdentityServers;
  logger: Logger;
  urls: { rest: string; grpc: string; restPort: number; grpcPort: number };
  /** Scheduled signing-key rotation (IDENTITY_KEY_ROTATION_INTERVAL); stopped by close. */
  rotation: RotationSchedule;
  close(): Promise<void>;
};

/**
 * Runs the migrations on MIGRATION_DB_URL when given (a direct session-mode
 * connection; the pooled DATABASE_URL may sit behind a transaction pooler),
 * else on the service's own connection. Closes the migrator's connection.
 */
export async function runMigrations(settings: Settings, serviceDb?: Database<IdentityDB>): Promise<string[]> {
  if (settings.migrationDbUrl) {
    const migrator = await openDatabase<IdentityDB>({
      url: settings.migrationDbUrl,
      maxConnections: 1,
      minConnections: 0,
    });
    try {
      return await migrateIdentity(migrator as never);
    } finally {
      await migrator.close();
    }
  }
  if (!serviceDb) throw new Error("no database to migrate");
  return migrateIdentity(serviceDb as never);
}

export function openIdentityDatabase(settings: Settings): Promise<Database<IdentityDB>> {
  return openDatabase<IdentityDB>({
    url: settings.databaseUrl,
    dataDir: settings.databaseUrl ? undefined : settings.dataDir,
    maxConnections: settings.dbMaxConns,
    minConnections: settings.dbMinConns,
    maxLifetimeMs: settings.dbMaxConnLifetimeMs,
  });
}

/**
 * Migrations for a started service: with an embedded database the migrator
 * must share its one connection, so MIGRATION_DB_URL applies only with DATABASE_URL.
 */
export function migrateForSettings(settings: Settings, database: Database<IdentityDB>): Promise<string[]> {
  return runMigrations(settings.databaseUrl ? settings : { ...settings, migrationDbUrl: undefined }, database);
}

/** The identity domain configured from the service's settings. */
export function identityFromSettings(database: Database<IdentityDB>, settings: Settings): Identity {
  return createIdentity(database, {
    kek: settings.kek,
    env: settings.env,
    jwtTtlSeconds: settings.jwtTtlSeconds,
    refreshTokenTtlSeconds: settings.refreshTokenTtlSeconds,
    argon2: settings.argon2,
    loginThrottle: settings.loginThrottle,
    idempotencyLockMs: settings.requestTimeoutMs * 2,
    signupOpen: settings.signupOpen,
    invitationTtlSeconds: settings.invitationTtlSeconds,
    publicUrl: settings.publicUrl,
    webhooks: settings.webhooks,
  });
}

/** Start-up: migrate, ensure an active signing key, bootstrap the owner if configured, listen. */
export async function startApp(
  settings: Settings,
  options: {
    logDestination?: DestinationStream;
    database?: Database<IdentityDB> & { url?: string };
    /** The internal port's mutual TLS (internalTlsFromEnv); undefined only with INTERNAL_TLS=off. */
    internalTls: ServiceTls | undefined;
  },
): Promise<App> {
  const logger = createLogger(settings.logLevel, options.logDestination);
  // PGlite has one connection per data directory: the migrator must share it.
  const database = options.database ?? (await openIdentityDatabase(settings));
  // LISTEN needs a session of its own: through a transaction pooler it would
  // seem to work and never deliver, so the direct MIGRATION_DB_URL wins.
  const changesUrl = options.database ? options.database.url : (settings.migrationDbUrl ?? settings.databaseUrl);
  let changes: InvalidationListener | undefined;
  try {
    const applied = await migrateForSettings(settings, database);
    if (applied.length) logger.info({ applied }, "migrations applied");
    const identity = identityFromSettings(database, settings);
    if (database.kind === "postgres" && changesUrl) {
      changes = await identity.followChanges(changesUrl, (err) =>
        logger.warn({ err }, "auth change listener lost; verification caches off until it reconnects"),
      );
    }
    const kid = await identity.keys.ensureActiveKey();
    // Made now, so the first unknown-email login costs no more than later ones.
    await identity.hasher.dummyHash();
    const niced = await lowerThreadpoolPriority(settings.argon2.threadNice ?? 0);
    if (niced.length)
      logger.info({ threads: niced.length, steps: settings.argon2.threadNice }, "hashing threads niced");
    logger.info({ kid }, "signing key active");
    if (settings.bootstrap) {
      const result = await identity.bootstrap(settings.bootstrap);
      logger.info(
        { created: result.created, userId: result.userId, orgId: result.orgId },
        result.created ? "bootstrap owner created" : "bootstrap owner exists; nothing changed",
      );
    }
    const servers = createIdentityServers(identity, settings, logger, options.internalTls);
    const { rest, grpc } = await servers.listen();
    identity.publicUrl ??= rest.url;
    const purge = setInterval(
      () => identity.idempotency.purgeExpired().catch((err) => logger.warn({ err }, "idempotency purge failed")),
      3600_000,
    );
    purge.unref();
    const rotation = startRotationSchedule(identity.keys, settings.keyRotation, {
      step: (step) =>
        logger.info(
          {
            published: step.published,
            activated: step.activated,
            deactivated: step.deactivated,
            retired: step.retired,
          },
          "signing key rotation step",
        ),
      error: (err) => logger.warn({ err }, "signing key rotation step failed; retried on the next tick"),
    });
    identity.webhookWorker.start((err) =>
      logger.warn({ err }, "webhook delivery pass failed; retried on the next poll"),
    );
    return {
      identity,
      servers,
      logger,
      urls: { rest: rest.url, grpc: grpc.url, restPort: rest.port, grpcPort: grpc.port },
      rotation,
      async close() {
        clearInterval(purge);
        await identity.webhookWorker.stop();
        await rotation.stop();
        await servers.close();
        await changes?.stop();
        await database.close();
      },
    };
  } catch (err) {
    await changes?.stop();
    await database.close().catch(() => {});
    throw err;
  }
}
