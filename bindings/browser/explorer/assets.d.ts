// Vite's asset imports, as the explorer uses them: `import url from "./file?url"` gives the file's URL in the build.
declare module "*?url" {
  const url: string;
  export default url;
}
