// Types of codegen.js (plain JavaScript so that scripts/a2ui-schemas.mjs runs it under Node).
export declare const V09_ID: string;
export declare const V08_ID: string;
export declare function exportsFor(basicCatalog: { components: Record<string, unknown> }): Record<string, string>;
export declare function generateValidators(schemas: { v08Message: object; v09Message: object; v09Common: object; v09Basic: object }): string;
