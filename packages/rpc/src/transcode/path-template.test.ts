import assert from "node:assert/strict";
import { test } from "node:test";
import { compareScores, matchTemplate, parseTemplate, pathParts, TemplateSyntaxError } from "./path-template.ts";

// [template, request path, expected variables (null: no match)]
// Drawn from the examples of google/api/http.proto and their edge cases.
const cases: [string, string, Record<string, string> | null][] = [
  // literals
  ["/v1/messages", "/v1/messages", {}],
  ["/v1/messages", "/v1/messages/", null],
  ["/v1/messages", "/v1/message", null],
  ["/v1/messages", "/v1/messages/x", null],
  ["/v1/messages", "/v1", null],
  ["/v1/messages", "/V1/messages", null],
  ["/v1/messages", "/v1/%6Dessages", {}],
  ["/v1/a%20b", "/v1/a%20b", {}],
  ["/v1/a%20b", "/v1/a b", {}],
  // single variables
  ["/v1/messages/{message_id}", "/v1/messages/123456", { message_id: "123456" }],
  ["/v1/messages/{message_id}", "/v1/messages/", null],
  ["/v1/messages/{message_id}", "/v1/messages", null],
  ["/v1/messages/{message_id}", "/v1/messages/1/2", null],
  ["/v1/messages/{message_id}", "/v1/messages/a%2Fb", { message_id: "a/b" }],
  ["/v1/messages/{message_id}", "/v1/messages/a%2fb", { message_id: "a/b" }],
  ["/v1/messages/{message_id}", "/v1/messages/hello%20world", { message_id: "hello world" }],
  ["/v1/messages/{message_id}", "/v1/messages/%E2%9C%93", { message_id: "✓" }],
  ["/v1/messages/{message_id}", "/v1/messages/caf%C3%A9", { message_id: "café" }],
  ["/v1/messages/{message_id}", "/v1/messages/%ZZ", null],
  ["/v1/messages/{message_id}", "/v1/messages/%E2%9C", null],
  ["/v1/messages/{message_id}", "/v1/messages/a+b", { message_id: "a+b" }],
  ["/v1/messages/{message_id}", "/v1/messages/a:b", { message_id: "a:b" }],
  ["/v1/messages/{message_id=*}", "/v1/messages/x", { message_id: "x" }],
  [
    "/v1/users/{user_id}/messages/{message_id}",
    "/v1/users/me/messages/123456",
    { user_id: "me", message_id: "123456" },
  ],
  ["/v1/users/{user_id}/messages/{message_id}", "/v1/users/me/messages", null],
  // nested field paths
  [
    "/v1/messages/{message_id}/{sub.subfield}",
    "/v1/messages/123456/foo",
    { message_id: "123456", "sub.subfield": "foo" },
  ],
  ["/v1/{a.b.c}", "/v1/deep", { "a.b.c": "deep" }],
  // multi-segment variables
  ["/v1/{name=messages/*}", "/v1/messages/123", { name: "messages/123" }],
  ["/v1/{name=messages/*}", "/v1/messages", null],
  ["/v1/{name=messages/*}", "/v1/other/123", null],
  ["/v1/{name=messages/*}", "/v1/messages/1/2", null],
  ["/v1/{name=messages/*}", "/v1/messages/a%2Fb", { name: "messages/a%2Fb" }],
  ["/v1/{name=messages/*}", "/v1/messages/a%20b", { name: "messages/a b" }],
  ["/v1/{name=shelves/*/books/*}", "/v1/shelves/1/books/2", { name: "shelves/1/books/2" }],
  ["/v1/{name=shelves/*/books/*}", "/v1/shelves/1/books", null],
  ["/v1/{name=shelves/*/books/*}", "/v1/shelves/1/books/2/x", null],
  ["/v1/{book.name=shelves/*/books/*}", "/v1/shelves/s/books/b", { "book.name": "shelves/s/books/b" }],
  ["/v1/{parent=shelves/*}/books", "/v1/shelves/7/books", { parent: "shelves/7" }],
  ["/v1/{parent=shelves/*}/books", "/v1/shelves/7", null],
  // wildcards outside variables
  ["/v1/*/items", "/v1/anything/items", {}],
  ["/v1/*/items", "/v1/items", null],
  ["/v1/*/items", "/v1/a/b/items", null],
  ["/v1/*/items/{id}", "/v1/x/items/9", { id: "9" }],
  // **
  ["/v1/files/{path=**}", "/v1/files/a", { path: "a" }],
  ["/v1/files/{path=**}", "/v1/files/a/b/c", { path: "a/b/c" }],
  ["/v1/files/{path=**}", "/v1/files", { path: "" }],
  ["/v1/files/{path=**}", "/v1/files/a%2Fb/c", { path: "a%2Fb/c" }],
  ["/v1/files/{path=**}", "/v1/files/a%2fb", { path: "a%2fb" }],
  ["/v1/files/{path=**}", "/v1/files/a%20b/%7E", { path: "a b/~" }],
  ["/v1/files/{path=**}", "/v1/file/a", null],
  ["/v1/{name=projects/*/files/**}", "/v1/projects/p/files/x/y", { name: "projects/p/files/x/y" }],
  ["/v1/{name=projects/*/files/**}", "/v1/projects/p/files", { name: "projects/p/files" }],
  ["/v1/{name=projects/*/files/**}", "/v1/projects/files/x", null],
  ["/v1/**", "/v1/a/b", {}],
  ["/**", "/", {}],
  // verbs
  ["/v1/{name=operations/**}:cancel", "/v1/operations/a/b:cancel", { name: "operations/a/b" }],
  ["/v1/{name=operations/**}:cancel", "/v1/operations/a/b", null],
  ["/v1/{name=operations/**}:cancel", "/v1/operations/a/b:delete", null],
  ["/v1/{name=operations/**}:cancel", "/v1/operations:cancel", { name: "operations" }],
  ["/v1/messages/{id}:undelete", "/v1/messages/1:undelete", { id: "1" }],
  ["/v1/messages/{id}:undelete", "/v1/messages/1", null],
  ["/v1/messages/{id}:undelete", "/v1/messages/:undelete", null],
  ["/v1/echo:shout", "/v1/echo:shout", {}],
  ["/v1/echo:shout", "/v1/echo", null],
  ["/v1/echo", "/v1/echo:shout", null],
  ["/v1/messages/{id}", "/v1/messages/1:undelete", { id: "1:undelete" }],
  // empty segments never match a wildcard
  ["/v1/{a}/{b}", "/v1//x", null],
  ["/v1/{a}/{b}", "/v1/x/", null],
  ["/v1/{a}/{b}", "/v1/x/y", { a: "x", b: "y" }],
];

for (const [template, path, want] of cases) {
  test(`${template} ← ${path}`, () => {
    const t = parseTemplate(template);
    // Alone, and with the path split once for a whole table (lookupRoute): the same answer.
    for (const m of [matchTemplate(t, path), matchTemplate(t, path, pathParts(path))]) {
      if (want === null) {
        assert.equal(m, undefined, `expected no match, got ${JSON.stringify(m && Object.fromEntries(m.values))}`);
      } else {
        assert.ok(m, "expected a match");
        assert.deepEqual(Object.fromEntries(m.values), want);
      }
    }
  });
}

const invalid = [
  "v1/messages",
  "/v1//messages",
  "/v1/{}",
  "/v1/{a=b/{c}}",
  "/v1/{a",
  "/v1/a}",
  "/v1/**/x",
  "/v1/{name=**}/x",
  "/v1/{1abc}",
  "/v1/{a.}",
  "/v1/{a}/{a}",
  "/v1/x:",
  "/v1/x:a/b",
  "/v1/%zz",
  "/v1/a?b",
];

for (const source of invalid) {
  test(`syntax error: ${source}`, () => {
    assert.throws(() => parseTemplate(source), TemplateSyntaxError);
  });
}

test("literals outrank wildcards when both match", () => {
  const a = matchTemplate(parseTemplate("/v1/shelves/{id}"), "/v1/shelves/special")!;
  const b = matchTemplate(parseTemplate("/v1/shelves/special"), "/v1/shelves/special")!;
  const c = matchTemplate(parseTemplate("/v1/{rest=**}"), "/v1/shelves/special")!;
  assert.ok(compareScores(b.score, a.score) > 0);
  assert.ok(compareScores(a.score, c.score) > 0);
});

test("the table has at least 60 cases", () => {
  assert.ok(cases.length >= 60, String(cases.length));
});
