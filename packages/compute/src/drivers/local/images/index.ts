export { buildDebianImage, type DebianBuild, debianBuildAvailable, validateBuild } from "./debian-build.ts";
export { formatImageRef, HOST_IMAGE, type ImageRef, parseImageRef } from "./image-ref.ts";
export { ImageStore, type StoredImage } from "./image-store.ts";
export { ETC_MOUNT_POINTS } from "./tree.ts";
export { imageRootArgs } from "./image-root.ts";
export { type ImageListing, LocalImages, type RootImage } from "./local-images.ts";
