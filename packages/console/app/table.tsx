import type { ComponentChildren } from "preact";

/** What a table always shows: its column names and the text of an empty list. */
export type TableHead = {
  testId?: string;
  columns: string[];
  /** One more column, of actions, whose name only screen readers read. */
  actions?: boolean;
  /** The one row shown when `rows` is an empty list (none while it is not yet loaded). */
  empty?: string;
};

/**
 * A table that scrolls sideways on a narrow screen: a header row of the
 * columns, then a row per item of `rows` drawn by `children`.
 */
export function Table<T>({
  testId,
  columns,
  actions = false,
  empty,
  rows,
  children,
}: TableHead & { rows: T[] | undefined; children: (item: T) => ComponentChildren }) {
  return (
    <div class="table-scroll">
      <table data-testid={testId}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            {actions && (
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {empty && rows?.length === 0 && (
            <tr>
              <td colSpan={columns.length + (actions ? 1 : 0)}>{empty}</td>
            </tr>
          )}
          {rows?.map(children)}
        </tbody>
      </table>
    </div>
  );
}
