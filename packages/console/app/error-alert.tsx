/** A failed call's message, announced to screen readers; nothing when there is none. */
export function ErrorAlert({ message }: { message: string }) {
  if (!message) return null;
  return (
    <p role="alert" class="error">
      {message}
    </p>
  );
}
